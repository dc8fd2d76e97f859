//! Turning a recorded delivery and the options into requests ready to send:
//! where they go, which headers and body, and how each one is signed.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use portpreview_shared::provider::{self, Provider, SignError};
use portpreview_shared::sanitize::escape_str;
use portpreview_shared::text::shorten;
use portpreview_shared::Header;

use super::attempt::{strip_unreplayable, Endpoint, Outgoing};
use super::report::Signed;
use super::stale::{resign_advice, stale_signature};
use super::{secret_sources, ReplayError, ReplayOptions};
use crate::config::{SecretFrom, SigningSecret};
use crate::store::NewDelivery;
use crate::target::Target;

/// One identity of the event: the recorded one, or a fresh one for `--fresh`.
#[derive(Debug, Clone)]
pub struct Variant {
    /// Headers to send (before signing).
    pub headers: Vec<Header>,
    /// Body to send, shared by every attempt that sends it unchanged.
    pub body: Bytes,
    /// Event key of this identity.
    pub event_key: String,
    /// How that key was made (`body:/id`, `sha256:body`…).
    pub event_key_source: String,
    /// The event's type, when it names one.
    pub event_type: Option<String>,
}

/// Everything fixed for the whole run.
#[derive(Debug)]
pub struct Plan {
    /// Where attempts connect.
    pub endpoint: Endpoint,
    /// Method.
    pub method: String,
    /// Path and query sent.
    pub path: String,
    /// The recorded identity, modified by `--header`, `--drop-header` and `--body-file`.
    pub recorded: Variant,
    /// Provider, from the record or detected.
    pub provider: Option<Provider>,
    /// `(provider, secret)` when every attempt is signed just before it is sent.
    signing: Option<(Provider, SigningSecret)>,
    /// The URL the provider called, for providers that sign it (Square, Twilio):
    /// the recorded public URL when there is one, else the replay target.
    signed_url: String,
    /// The attempts are the recorded request, unedited by `--header`,
    /// `--drop-header` or `--body-file`, sent to the target it was
    /// recorded with: to the handler that had the event before.
    pub as_recorded: bool,
    /// The fresh events go out under the recorded signature, which no
    /// longer matches them: a handler that checks it refuses every one.
    pub signature_void: bool,
    /// The provider whose recorded signature the attempts carry, when
    /// nothing was found wrong with it before the run: a refusal is then
    /// the first sign that it no longer matches (a fixture edited by hand,
    /// a secret rotated).
    pub unwarned_signature: Option<Provider>,
    /// How the attempts differ from the recorded request, as the report
    /// and the run kept in the history say it: `body from --body-file`,
    /// `X-Test set`, `X-Old left out`.
    pub edits: Vec<String>,
    /// Things the report should mention.
    pub warnings: Vec<String>,
}

/// What every attempt is signed with: for whom, and from where.
#[derive(Debug, Clone, Copy)]
pub struct SignedWith<'a> {
    /// The provider the attempts are signed for.
    pub provider: Provider,
    /// Where the secret came from.
    pub from: &'a SecretFrom,
    /// The secret goes as it is, a plain token (a GitLab hook's
    /// X-Gitlab-Token), not as a key that signs.
    pub token: bool,
}

impl Plan {
    /// What every attempt is signed with, when they are.
    pub fn signed_with(&self) -> Option<SignedWith<'_>> {
        self.signing.as_ref().map(|(provider, secret)| SignedWith {
            provider: *provider,
            from: &secret.from,
            token: provider::token_only(*provider, &self.recorded.headers),
        })
    }

    /// How every attempt is signed, as the report says it.
    pub fn signed(&self) -> Option<Signed> {
        self.signed_with().map(|with| Signed {
            provider: with.provider.name().to_string(),
            secret_from: with.from.to_string(),
            url: with.provider.signs_url().then(|| self.signed_url.clone()),
            token: with.token,
        })
    }
}

/// The recorded headers as attempts send them: `--drop-header` and
/// `--header` applied, those a replay recomputes or must not send left
/// out, and any HTTP/1 cannot carry left out with a warning.
fn replayed_headers(request: &NewDelivery, opts: &ReplayOptions, warnings: &mut Vec<String>) -> Vec<Header> {
    let given = |name: &str| -> Vec<Header> {
        (opts.add_headers.iter())
            .filter(|(given, _)| given.eq_ignore_ascii_case(name))
            .map(|(n, v)| Header::new(n.as_str(), v.as_bytes()))
            .collect()
    };
    // A header given with `--header` takes the place of the recorded one,
    // so a replay differs from the delivery only where it was asked to.
    let mut placed = std::collections::HashSet::new();
    let mut headers = Vec::with_capacity(request.request_headers.len() + opts.add_headers.len());
    for header in &request.request_headers {
        if opts.drop_headers.iter().any(|d| d.eq_ignore_ascii_case(&header.name)) {
            continue;
        }
        let set = given(&header.name);
        if set.is_empty() {
            headers.push(header.clone());
        } else if placed.insert(header.name.to_ascii_lowercase()) {
            headers.extend(set);
        }
    }
    for (name, value) in &opts.add_headers {
        if !placed.contains(&name.to_ascii_lowercase()) {
            headers.push(Header::new(name.as_str(), value.as_bytes()));
        }
    }
    strip_unreplayable(&mut headers, request.host_preserved);
    headers.retain(|h| {
        let sendable =
            http::HeaderName::from_bytes(h.name.as_bytes()).is_ok() && http::HeaderValue::from_bytes(&h.value).is_ok();
        if !sendable {
            warnings.push(format!(
                "header {:?} cannot be sent over HTTP/1 and was left out",
                h.name
            ));
        }
        sendable
    });
    headers
}

/// The provider of a recorded delivery: as recorded, else detected.
pub fn provider_of(request: &NewDelivery) -> Option<Provider> {
    request
        .provider
        .as_deref()
        .and_then(Provider::from_name)
        .or_else(|| provider::detect(&request.request_headers, &request.request_body))
}

impl Plan {
    /// Checks and prepares a run; every "could not run" reason surfaces here.
    pub fn new(request: &NewDelivery, opts: &ReplayOptions) -> Result<Self, ReplayError> {
        // A body given with --body-file replaces the stored one whole.
        if opts.body.is_none() && request.request_truncated() {
            return Err(ReplayError::Truncated {
                kept: request.request_body.len() as u64,
                size: request.request_body_size,
            });
        }
        let (endpoint, path) = resolve_target(&request.target, opts.target.as_deref(), &request.path)?;
        // Another path on the same server may be another handler.
        let to_recorded =
            resolve_target(&request.target, None, &request.path).is_ok_and(|(recorded, recorded_path)| {
                recorded.scheme == endpoint.scheme && recorded.handler() == endpoint.handler() && recorded_path == path
            });
        let mut warnings = Vec::new();
        let body = Bytes::from(opts.body.clone().unwrap_or_else(|| request.request_body.clone()));
        // A --body-file holding the recorded body changes nothing: its
        // signature and event key still hold.
        let body_changed = opts.body.as_ref().is_some_and(|given| *given != request.request_body);
        let headers = replayed_headers(request, opts, &mut warnings);
        let provider = provider_of(request);
        // A request sent without its provider's signature (by curl, by a
        // test) has none for a fresh identity to void.
        let voided = opts.fresh
            && fresh_voids_signature(provider, &path, &headers, &body, opts.fresh_field.as_deref())?
            && provider.is_some_and(|p| provider::carries_signature(p, &headers, &body));
        let signing = signing(provider, &headers, opts, voided, &mut warnings)?;
        // A fresh identity that voids the signature is flagged as unsigned;
        // otherwise the recorded signature goes out, and its age matters.
        let mut unwarned_signature = None;
        if let (None, false, Some(p)) = (&signing, voided, provider) {
            let found = opts.secret.as_ref().map(|secret| &secret.from);
            let said = recorded_signature_warnings(p, &headers, &body, body_changed, found);
            let carried = p.resignable() && provider::carries_signature(p, &headers, &body);
            unwarned_signature = (said.is_empty() && carried).then_some(p);
            warnings.extend(said);
        }
        // An edited request is the event it now names, not the recorded one.
        let edited = body_changed || !opts.add_headers.is_empty() || !opts.drop_headers.is_empty();
        let (event_key, event_key_source, event_type) = if edited {
            let key = provider::event_key_again(provider, &headers, &body, &request.event_key_source);
            (key.key, key.source, key.event_type)
        } else {
            // A fixture keeps no type: its request names it, read once a run.
            let event_type =
                (request.event_type.clone()).or_else(|| provider::event_type(provider, &headers, &body, true));
            (request.event_key.clone(), request.event_key_source.clone(), event_type)
        };
        // Twilio signs a JSON body's hash into the URL: a changed body sent
        // under the recorded hash would be refused by the handler's check.
        let rehash = |url: String| match (&signing, body_changed) {
            (Some((Provider::Twilio, _)), true) => twilio_rehashed(url, &body),
            _ => url,
        };
        let signed_url = rehash(signed_url(request, &endpoint, &path, signing.as_ref(), &mut warnings));
        let path = rehash(path);
        let plan = Self {
            signature_void: voided && signing.is_none(),
            unwarned_signature,
            signed_url,
            endpoint,
            method: request.method.clone(),
            path,
            recorded: Variant {
                headers,
                body,
                event_key,
                event_key_source,
                event_type,
            },
            provider,
            signing,
            as_recorded: !edited && to_recorded,
            edits: edits(opts, body_changed),
            warnings,
        };
        // Sign once now so a provider that cannot be re-signed stops the run before anything is sent.
        plan.outgoing(&plan.recorded)?;
        Ok(plan)
    }

    /// The full URL attempts go to.
    pub fn url(&self) -> String {
        self.endpoint.url(&self.path)
    }

    /// A new identity for the event (`--fresh`).
    pub fn fresh(&self, field: Option<&str>) -> Result<Variant, ReplayError> {
        let mut variant = self.recorded.clone();
        let mut body = variant.body.to_vec();
        variant.event_key = provider::fresh_identity(self.provider, &mut variant.headers, &mut body, field)?;
        if let Some(source) = provider::fresh_key_source(self.provider, &variant.headers, &body, field) {
            variant.event_key_source = source;
        }
        variant.body = Bytes::from(body);
        Ok(variant)
    }

    /// The request for one attempt, signed with the current time when signing is on.
    pub fn outgoing(&self, variant: &Variant) -> Result<Outgoing, ReplayError> {
        let mut headers = variant.headers.clone();
        let mut path = self.path.clone();
        let body = match &self.signing {
            // Some providers (Linear, Mailgun) sign a timestamp inside the
            // body, so a signed attempt needs a body of its own.
            Some((provider, secret)) => {
                let mut signed_url = self.signed_url.clone();
                if *provider == Provider::Twilio {
                    // A fresh identity is a body the plan's hash is not of.
                    path = twilio_rehashed(path, &variant.body);
                    signed_url = twilio_rehashed(signed_url, &variant.body);
                }
                let mut body = variant.body.to_vec();
                provider::resign(
                    *provider,
                    secret.secret.expose(),
                    &mut headers,
                    &mut body,
                    SystemTime::now(),
                    Some(&signed_url),
                )?;
                Bytes::from(body)
            }
            None => variant.body.clone(),
        };
        Ok(Outgoing {
            method: self.method.clone(),
            path,
            headers,
            body,
        })
    }

    /// The attempt as a history record (`replay_of` left for the caller),
    /// without its body: that stays shared in `out.body`.
    pub fn record(&self, out: &Outgoing, variant: &Variant, sent_at: SystemTime) -> NewDelivery {
        let received_at_ms = sent_at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        NewDelivery {
            received_at_ms,
            tunnel_url: String::new(),
            target: self.endpoint.url(""),
            method: out.method.clone(),
            path: out.path.clone(),
            request_headers: out.wire_headers(&self.endpoint.authority()),
            request_body: Vec::new(),
            request_body_size: out.body.len() as u64,
            provider: self.provider.map(|p| p.name().to_string()),
            event_key: variant.event_key.clone(),
            event_key_source: variant.event_key_source.clone(),
            replay_of: None,
            host_preserved: out.headers.iter().any(|h| h.name.eq_ignore_ascii_case("host")),
            event_type: variant.event_type.clone(),
        }
    }
}

/// Whether giving the event a fresh identity changes what its provider
/// signs, so the recorded signature no longer verifies (a Stripe body's
/// `id`, unlike GitHub's unsigned `X-GitHub-Delivery`). Making one here also
/// stops a `--fresh-field` that names nothing before anything is sent.
fn fresh_voids_signature(
    provider: Option<Provider>,
    path: &str,
    headers: &[Header],
    body: &[u8],
    field: Option<&str>,
) -> Result<bool, ReplayError> {
    let (mut fresh_headers, mut fresh_body) = (headers.to_vec(), body.to_vec());
    provider::fresh_identity(provider, &mut fresh_headers, &mut fresh_body, field)?;
    // Twilio signs a JSON body through its hash in the URL, not the body itself.
    let hash_voided =
        provider == Some(Provider::Twilio) && provider::with_twilio_body_hash(path, &fresh_body).is_some();
    Ok(hash_voided
        || provider.is_some_and(|p| !provider::signs_alike(p, (headers, body), (&fresh_headers, &fresh_body))))
}

/// How `opts` edit the recorded request, each edit in a few words; a
/// `--body-file` holding the recorded body edits nothing.
fn edits(opts: &ReplayOptions, body_changed: bool) -> Vec<String> {
    let body = body_changed.then(|| "body from --body-file".to_owned());
    let set = opts.add_headers.iter().map(|(name, _)| format!("{name} set"));
    // Named as the set ones are, in lower case.
    let left_out = opts
        .drop_headers
        .iter()
        .map(|name| format!("{} left out", name.to_ascii_lowercase()));
    body.into_iter().chain(set).chain(left_out).collect()
}

/// What to know of a recorded signature sent as it is: that it is too
/// old for its provider, and that it no longer covers a changed body.
fn recorded_signature_warnings(
    p: Provider,
    headers: &[Header],
    body: &[u8],
    body_changed: bool,
    found: Option<&SecretFrom>,
) -> Vec<String> {
    // A request sent without a signature (by curl, by a test) has none to
    // be too old or to break, whatever its timestamp header says.
    if !provider::carries_signature(p, headers, body) {
        return Vec::new();
    }
    let mut warnings: Vec<String> = stale_signature(p, headers, body, SystemTime::now(), found)
        .into_iter()
        .collect();
    if body_changed {
        warnings.push(if p.resignable() {
            format!(
                "the body was changed but not re-signed: a handler that checks {p} signatures refuses it; {}",
                resign_advice(p, found)
            )
        } else {
            format!("the body was changed, and {p} signs with its own private key: a handler that checks signatures refuses it")
        });
    }
    warnings
}

/// The URL a signature over the URL is made for: the public one the
/// provider called, or, with none recorded, where the attempts go, with a
/// warning when `signing` signs URLs.
fn signed_url(
    request: &NewDelivery,
    endpoint: &Endpoint,
    path: &str,
    signing: Option<&(Provider, SigningSecret)>,
    warnings: &mut Vec<String>,
) -> String {
    match request.tunnel_url.trim_end_matches('/') {
        "" => {
            let url = endpoint.url(path);
            if let Some((p, _)) = signing.filter(|(p, _)| p.signs_url()) {
                // The handler checks the URL the provider called; with
                // none recorded, say which one the signature is over.
                warnings.push(format!(
                    "no public URL was recorded, so the {p} signature is made over {url}, where the attempts \
                     go: a handler that checks it against another URL refuses them"
                ));
            }
            url
        }
        public => {
            let called = format!("{public}{}", request.path);
            let recorded_path = if request.path.is_empty() { "/" } else { &request.path };
            if let Some((p, _)) = signing.filter(|(p, _)| p.signs_url() && path != recorded_path) {
                // The handler checks the signature against the URL it was
                // called at, which `--target` just moved.
                warnings.push(format!(
                    "the {p} signature is made over {called}, the URL {p} called, but the attempts ask for \
                     {path}: a handler that checks it against the path it is called at refuses them"
                ));
            }
            called
        }
    }
}

/// `url` with its `bodySHA256` made for `body`. Twilio puts a JSON body's
/// hash in the URL it signs, and its validator checks the body against it.
fn twilio_rehashed(url: String, body: &[u8]) -> String {
    provider::with_twilio_body_hash(&url, body).unwrap_or(url)
}

/// What signs the attempts, if anything; `voided` when a fresh identity
/// leaves the recorded signature unable to verify.
fn signing(
    provider: Option<Provider>,
    headers: &[Header],
    opts: &ReplayOptions,
    voided: bool,
    warnings: &mut Vec<String>,
) -> Result<Option<(Provider, SigningSecret)>, ReplayError> {
    let resignable = provider.is_none_or(Provider::resignable);
    // Only the provider holds its private key: the recorded signature goes
    // out, and still verifies on the byte-identical replay most runs are.
    // Refusing would fail a whole `check fixtures/ --resign` over one
    // Discord fixture.
    if let Some(p) = provider.filter(|_| opts.resign && !resignable) {
        warnings.push(format!(
            "{}; --resign sends the recorded signature",
            SignError::PrivateKey(p)
        ));
    }
    let signs = resignable && (opts.resign || (opts.fresh && opts.secret.is_some()));
    if !signs {
        if voided {
            match provider {
                Some(p) if !p.resignable() => warnings.push(format!(
                    "the fresh events are not re-signed: {p} signs with its own private key, so a handler that checks \
                     signatures will reject them"
                )),
                Some(p) => warnings.push(format!(
                    "the fresh events are not re-signed (no secret for {p}): a handler that checks signatures will reject them; \
                     {}",
                    secret_sources(p)
                )),
                None => {}
            }
        }
        return Ok(None);
    }
    // No provider, no signature to make: refusing would fail a whole
    // `check fixtures/ --resign` over one unsigned internal webhook.
    let Some(provider) = provider else {
        warnings.push(match opts.fresh {
            true => "the fresh events are not re-signed: the provider is unknown".into(),
            false => "the provider is unknown, so --resign signs nothing: the request goes as recorded".into(),
        });
        return Ok(None);
    };
    match &opts.secret {
        // A signing token given for a hook that sends a secret token: sent
        // as that token, it would be refused, and the recorded one still
        // verifies. (`PORTPREVIEW_SECRET` gives every provider the same.)
        Some(given) if provider::token_only(provider, headers) && given.secret.expose().starts_with("whsec_") => {
            warnings.push(format!(
                "the {provider} secret from {} is a signing token (whsec_…), but this hook sends a secret token \
                 (X-Gitlab-Token), not a signature: --resign sends the recorded token, which still verifies",
                given.from
            ));
            Ok(None)
        }
        Some(given @ SigningSecret { secret, .. }) => {
            // A secret pasted into a CI variable or read from a file often
            // brings a newline along; signing with it fails every attempt
            // for a reason the handler cannot tell.
            if secret.expose().trim() != secret.expose() {
                warnings.push(format!(
                    "the {provider} secret begins or ends with whitespace (a newline?) and signs as given: \
                     remove it unless the secret holds it"
                ));
            }
            // Left empty, as CI leaves a secret a job may not read, the
            // provider's own variable gave way to a wider one.
            if matches!(&given.from, SecretFrom::Env(var) if var == crate::config::ANY_PROVIDER_SECRET_ENV)
                || matches!(given.from, SecretFrom::ConfigFile(_))
            {
                for var in crate::config::set_but_empty(crate::config::secret_envs(provider)) {
                    warnings.push(format!(
                        "{var} is set but empty: the attempts are signed with the {provider} secret from {} instead",
                        given.from
                    ));
                }
            }
            Ok(Some((provider, given.clone())))
        }
        // Refusing would fail a whole `check fixtures/ --resign` over one
        // GitLab hook whose recorded token still verifies.
        None if provider::token_only(provider, headers) => {
            warnings.push(match provider::header(headers, "x-gitlab-token").is_some() {
                true => format!(
                    "this {provider} hook sends a secret token (X-Gitlab-Token), not a signature: --resign sends \
                     the recorded one, which still verifies; to send another, {}",
                    secret_sources(provider)
                ),
                false => format!(
                    "this {provider} hook carries neither a signature nor a secret token, so --resign has nothing to \
                     make: it goes as recorded; to add a token, {}",
                    secret_sources(provider)
                ),
            });
            Ok(None)
        }
        None => Err(ReplayError::NoSecret {
            provider: provider.name(),
            sources: secret_sources(provider),
        }),
    }
}

/// Where attempts go and which path they ask for. A `--target` with a path
/// replaces the recorded path (keeping the recorded query unless it has one);
/// one without keeps the path the handler was sent, the tunnel's base path
/// (`portpreview http localhost:3000/api`) included.
pub fn resolve_target(
    recorded: &str,
    flag: Option<&str>,
    recorded_path: &str,
) -> Result<(Endpoint, String), ReplayError> {
    let recorded_path = if recorded_path.is_empty() { "/" } else { recorded_path };
    // Only a relay that broke the protocol sends one: the tunnel refused it
    // with 400, and sent on, a full URL (`http://169.254.169.254/…`) in
    // the request line would reach a handler that acts as a proxy.
    if !recorded_path.starts_with('/') {
        return Err(ReplayError::Target(format!(
            "the delivery's path is not a path, {}: the tunnel refused it, and it is neither replayed nor \
             exported as a request",
            escape_str(&shorten(recorded_path, 200))
        )));
    }
    let (text, path) = match flag {
        Some(flag) => {
            let target = parse_target_flag(flag)
                .map_err(|reason| ReplayError::Target(format!("invalid --target \"{flag}\": {reason}")))?;
            let path = match explicit_path(flag) {
                Some(path) if path.contains('?') => path.to_string(),
                Some(path) => {
                    let query = recorded_path.find('?').map_or("", |at| &recorded_path[at..]);
                    format!("{path}{query}")
                }
                None => match Target::parse(recorded) {
                    Ok(recorded) => recorded.request_path(recorded_path),
                    Err(_) => recorded_path.to_string(),
                },
            };
            (target, path)
        }
        None => {
            if recorded.is_empty() {
                return Err(ReplayError::Target(
                    "the delivery has no recorded target: pass --target URL".into(),
                ));
            }
            let target = Target::parse(recorded).map_err(|err| ReplayError::Target(err.to_string()))?;
            let path = target.request_path(recorded_path);
            (target, path)
        }
    };
    let host = text.host.trim_start_matches('[').trim_end_matches(']').to_string();
    let endpoint = Endpoint {
        scheme: text.scheme,
        host,
        port: text.port,
    };
    Ok((endpoint, path))
}

/// The URL a replay of a request recorded at `recorded` (with `recorded_path`)
/// is sent to, `--target` applied. Exports aim with this too, so an exported
/// command and `replay` never send the same delivery to different places.
pub fn aimed_url(recorded: &str, flag: Option<&str>, recorded_path: &str) -> Result<String, ReplayError> {
    let (endpoint, path) = resolve_target(recorded, flag, recorded_path)?;
    Ok(endpoint.url(&path))
}

/// A `--target` as given, or why it cannot be one.
pub fn parse_target_flag(flag: &str) -> Result<Target, &'static str> {
    let target = Target::parse(flag).map_err(|err| err.reason())?;
    // Dropped without a word, either would send another request than asked.
    if target.base_path.starts_with('?') || target.base_path.contains('#') {
        return Err(
            "a fragment is never sent, and a query needs a path before it (http://localhost:3000/webhooks?x=1)",
        );
    }
    Ok(target)
}

/// The path part of a `--target` written as a URL, if it has one. A bare
/// `/` is none: `http://localhost:3000/` is how a base URL is often
/// pasted, and sending every replay to `/` would be a surprise.
fn explicit_path(flag: &str) -> Option<&str> {
    let rest = flag.split_once("://").map_or(flag, |(_, rest)| rest);
    let at = rest.find(['/', '?'])?;
    let path = &rest[at..];
    if path.starts_with('?') || path == "/" {
        return None;
    }
    Some(path)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
