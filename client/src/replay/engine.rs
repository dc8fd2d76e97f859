//! One replay run, step by step: read the state, send, let it settle, judge.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime};

use futures_util::stream::{FuturesUnordered, StreamExt};

use super::attempt::{Connection, Endpoint};
use super::plan::{Plan, Variant};
use super::probe::{read_final, read_settled, same_state, Probe, ProbeError, Settled};
use super::report::{Attempt, Report, Role, StateTrace};
use super::{verdict, HadBefore, Phase, Progress, ReplayError, ReplayOptions, MAX_CONCURRENCY, MAX_TIMES};
use crate::store::NewDelivery;

/// Connections for the attempts, one per attempt in flight.
struct Pool {
    endpoint: Endpoint,
    timeout: Duration,
    conns: Vec<Connection>,
    /// Whether an answered attempt's connection stays open for the next one:
    /// only when attempts go one at a time and nothing is probed. Many local
    /// handlers (Python's `http.server`, `php -S`) serve one connection at a
    /// time, and an idle attempt connection would starve the probe, or a
    /// sibling attempt of the same batch, until one timed out. A loopback
    /// handshake per attempt is cheap beside that; attempts one at a time,
    /// the common case, keep their connection.
    keep_alive: bool,
}

/// How long the check that the target is up waits for it to take a connection.
const UP_CHECK: Duration = Duration::from_secs(5);

impl Pool {
    /// Connects once now, so a target that is down stops the run before it starts.
    async fn open(endpoint: &Endpoint, timeout: Duration, keep_alive: bool) -> Result<Self, ReplayError> {
        // `--timeout` bounds answers: a short one must not make a handler
        // that is up, behind a `localhost` tried as ::1 first, look down.
        let mut first = Connection::open_within(endpoint.clone(), timeout.max(UP_CHECK))
            .await
            .map_err(|error| match crate::local_tls::TlsError::within(&error) {
                Some(tls) => ReplayError::TargetTls(tls.about(&endpoint.url(""))),
                None => ReplayError::TargetDown {
                    target: endpoint.authority(),
                    error,
                },
            })?
            .answering_within(timeout);
        if !keep_alive {
            first.close().await;
        }
        Ok(Self {
            endpoint: endpoint.clone(),
            timeout,
            conns: vec![first],
            keep_alive,
        })
    }

    fn take(&mut self, width: usize) -> &mut [Connection] {
        while self.conns.len() < width {
            self.conns
                .push(Connection::lazy(self.endpoint.clone()).answering_within(self.timeout));
        }
        &mut self.conns[..width]
    }
}

struct Run<'a> {
    plan: &'a Plan,
    opts: &'a ReplayOptions,
    progress: &'a (dyn Fn(Progress) + Sync),
    pool: Pool,
    probe: Option<Probe>,
    /// Why the state stopped being read: it grew too large to compare whole.
    unreadable: Option<ProbeError>,
    trace: StateTrace,
    /// Whether the state before the first attempt was read: a run stopped
    /// or cut short before that has no state to show.
    read_before: bool,
    /// The first step whose reads printed the lines of the state before it
    /// in another order, which counts as no change.
    reordered: Option<usize>,
    /// Why nothing was sent: the read before attempt 1 never held still
    /// ([`verdict::moves_with_nothing_sent`]).
    restless: Option<super::report::Check>,
    attempts: Vec<Attempt>,
    total: u32,
}

/// Runs the whole replay, or as much of it as comes before `interrupt`.
pub async fn run(
    request: &NewDelivery,
    opts: &ReplayOptions,
    progress: &(dyn Fn(Progress) + Sync),
    interrupt: impl Future<Output = ()> + Send,
) -> Result<Report, ReplayError> {
    let started = Instant::now();
    // `check` suites and the TUI reach here without clap's range checks.
    if !(1..=MAX_TIMES).contains(&opts.times) {
        return Err(ReplayError::Times(opts.times));
    }
    if opts.fresh && opts.times < 2 {
        return Err(ReplayError::FreshBurstOfOne);
    }
    if let Some(asked) = opts.concurrency.filter(|c| !(1..=MAX_CONCURRENCY).contains(c)) {
        return Err(ReplayError::Concurrency(asked));
    }
    if opts.timeout.is_zero() {
        return Err(ReplayError::Timeout);
    }
    if opts.expect_effect && opts.probe.is_none() {
        return Err(ReplayError::EffectUnseeable);
    }
    fits_open_files(opts, portpreview_shared::open_files::limit())?;
    let plan = Plan::new(request, opts)?;
    let one_at_a_time = !opts.fresh && opts.width() == 1;
    let pool = Pool::open(&plan.endpoint, opts.timeout, opts.probe.is_none() && one_at_a_time).await?;
    let probe = opts.probe.as_ref().map(Probe::new).transpose()?;
    let mut run = Run {
        plan: &plan,
        opts,
        progress,
        pool,
        probe,
        unreadable: None,
        trace: StateTrace {
            steady: true,
            ..StateTrace::default()
        },
        read_before: false,
        reordered: None,
        restless: None,
        attempts: Vec::new(),
        total: opts.times.saturating_add(u32::from(opts.fresh)),
    };
    // The user stopping the run drops whatever is in flight; the attempts
    // already answered are still reported and recorded.
    let finished = tokio::select! {
        finished = run.all_steps() => Some(finished),
        () = interrupt => None,
    };
    let interrupted = match finished {
        Some(result) => {
            result?;
            false
        }
        None => true,
    };
    Ok(run.into_report(started.elapsed(), interrupted))
}

impl Run<'_> {
    /// Reads the state, sends every attempt, and waits out the last settle.
    async fn all_steps(&mut self) -> Result<(), ReplayError> {
        let (plan, opts) = (self.plan, self.opts);
        if self.probe.is_some() {
            (self.progress)(Progress {
                done: 0,
                total: self.total,
                phase: Phase::Settling,
            });
            if let Some(settled) = self.read_state().await? {
                self.read_before = true;
                self.trace.steady &= settled.steady;
                if !settled.steady {
                    let moved_from = settled.moved_from.as_deref().unwrap_or_default();
                    self.restless = Some(verdict::moves_with_nothing_sent(moved_from, &settled.state));
                }
                self.trace.before = settled.state;
                // Nothing has been sent yet, so every step's reads would
                // move the same way, each waiting out the cap, and the run
                // could judge nothing: stop before touching the handler.
                if self.restless.is_some() {
                    return Ok(());
                }
            }
        }
        if opts.fresh {
            let baseline = plan.fresh(opts.fresh_field.as_deref())?;
            self.step(&baseline, Role::Baseline, 1, 1).await?;
            let burst = plan.fresh(opts.fresh_field.as_deref())?;
            self.step(&burst, Role::Burst, opts.times, opts.burst_width()).await?;
        } else {
            self.step(&plan.recorded, Role::Replay, 1, 1).await?;
            let mut left = opts.times - 1;
            while left > 0 {
                let batch = left.min(opts.width());
                self.step(&plan.recorded, Role::Replay, batch, batch).await?;
                left -= batch;
            }
        }
        if let Some(probe) = self.probe.as_mut() {
            (self.progress)(Progress {
                done: self.total,
                total: self.total,
                phase: Phase::FinalWait,
            });
            let last = self.trace.after().to_string();
            let read = read_final(probe, self.trace.final_wait(opts.settle), &last).await;
            if let Some(moved_to) = self.unless_unreadable(read)? {
                self.trace.moved_to = moved_to;
            }
        }
        Ok(())
    }

    /// Sends `count` attempts of `variant`, `width` at a time, then reads the state once.
    async fn step(&mut self, variant: &Variant, role: Role, count: u32, width: u32) -> Result<(), ReplayError> {
        let first_new = self.attempts.len();
        let mut left = count;
        while left > 0 {
            let batch = left.min(width);
            self.send_batch(variant, role, batch).await?;
            left -= batch;
        }
        if self.probe.is_none() {
            return Ok(());
        }
        (self.progress)(Progress {
            done: self.attempts.len() as u32,
            total: self.total,
            phase: Phase::Settling,
        });
        let previous = self.trace.after().to_string();
        let Some(settled) = self.read_state().await? else {
            return Ok(());
        };
        self.trace.steady &= settled.steady;
        // Rows in another order are the state the step before left.
        let changed = !same_state(&settled.state, &previous);
        let step = self.trace.steps.len();
        if !changed && settled.state != previous {
            self.reordered.get_or_insert(step);
        }
        self.trace.steps.push(if changed { settled.state } else { previous });
        for attempt in &mut self.attempts[first_new..] {
            attempt.step = step;
            attempt.state_changed = Some(changed);
        }
        Ok(())
    }

    /// Reads the state until it holds still; `None` without a probe or once
    /// the state is too large to compare.
    async fn read_state(&mut self) -> Result<Option<Settled>, ReplayError> {
        let Some(probe) = self.probe.as_mut() else {
            return Ok(None);
        };
        let read = read_settled(probe, self.opts.settle).await;
        self.unless_unreadable(read)
    }

    /// A state too large to compare, or a probe that fails once the first
    /// read has been taken (attempts may have gone out by then), ends the
    /// reading, not the run: the attempts still go out and their answers
    /// are still judged and reported, but the verdict can no longer say
    /// "idempotent". A probe that fails its first read stops the run before
    /// anything is sent.
    fn unless_unreadable<T>(&mut self, read: Result<T, ProbeError>) -> Result<Option<T>, ReplayError> {
        match read {
            Ok(value) => Ok(Some(value)),
            Err(err) if self.read_before || matches!(err, ProbeError::TooLarge { .. }) => {
                self.probe = None;
                self.unreadable = Some(err);
                Ok(None)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Sends `count` attempts at once, each on its own connection, each signed just before it goes.
    async fn send_batch(&mut self, variant: &Variant, role: Role, count: u32) -> Result<(), ReplayError> {
        let plan = self.plan;
        let progress = self.progress;
        let total = self.total;
        let done = AtomicU32::new(self.attempts.len() as u32);
        // Said before the first answer: a handler slow to give it would
        // otherwise leave the terminal blank until then.
        progress(Progress {
            done: self.attempts.len() as u32,
            total,
            phase: Phase::Sending,
        });
        let keep_alive = self.pool.keep_alive;
        let sends = self.pool.take(count as usize).iter_mut().map(|conn| {
            let done = &done;
            async move {
                let out = plan.outgoing(variant)?;
                let sent_at = SystemTime::now();
                let answer = conn.send(&out).await;
                if !keep_alive {
                    conn.close().await;
                }
                let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                progress(Progress {
                    done: finished,
                    total,
                    phase: Phase::Sending,
                });
                Ok::<_, ReplayError>((plan.record(&out, variant, sent_at), out.body, answer))
            }
        });
        // Each attempt is kept as soon as it is answered: a run the user
        // stops drops this batch, and the handler has acted on what it answered.
        let mut sends: FuturesUnordered<_> = sends.collect();
        while let Some(result) = sends.next().await {
            let (request, body, answer) = result?;
            self.attempts.push(Attempt {
                n: self.attempts.len() as u32 + 1,
                role,
                request,
                body,
                answer,
                step: 0,
                state_changed: None,
            });
        }
        Ok(())
    }

    /// What the reads taken before the run was cut short show (the probe
    /// failed, its handler perhaps with it, or the user stopped the run):
    /// a duplicate, or a `--fresh` burst, that repeated the side effect
    /// convicts the handler whatever came after; one that did not proves
    /// nothing, as the rest went unread.
    fn convicted_before_the_end(&self) -> Option<super::report::Check> {
        if !self.read_before {
            return None;
        }
        let read: Vec<Attempt> = (self.attempts.iter())
            .filter(|a| a.state_changed.is_some())
            .cloned()
            .collect();
        // As a whole run's reads: only a state that held still, after an
        // attempt 1 that was answered or acted, and no late first effect,
        // can convict.
        if !self.first_judges() || !verdict::state_settled(&self.trace, self.opts.settle, &read).passed {
            return None;
        }
        let check = if self.opts.fresh {
            verdict::burst_acts_once(&self.trace, self.opts.times as usize)
        } else {
            verdict::duplicates_change_nothing(&read, &self.trace, self.had_the_event())
        };
        check.filter(|check| !check.passed && !verdict::makes_inconclusive(check.name))
    }

    /// Whether attempt 1 left a delivery for the others to duplicate: it
    /// was answered 2xx, or it acted though it was not. An attempt 1 that
    /// got no 2xx and changed nothing leaves none: the run failed, and no
    /// duplicate is judged (a handler that failed once may act on the
    /// next). One that acted all the same is the charge made before a
    /// failed answer, and its provider retries it: the retries that act
    /// again are the double charge.
    fn first_judges(&self) -> bool {
        let acted = self
            .trace
            .steps
            .first()
            .is_some_and(|first| first != &self.trace.before);
        self.attempts.first().is_some_and(Attempt::succeeded) || acted
    }

    /// How the handler is known to have had the event before the run: the
    /// history shows it answering the delivery 2xx (replayed unedited, to
    /// where it went), or an earlier fixture of the check sent it.
    fn had_the_event(&self) -> Option<&HadBefore> {
        match &self.opts.had_before {
            Some(HadBefore::WhenRecorded) if !self.plan.as_recorded => None,
            had => had.as_ref(),
        }
    }

    /// The report on the attempts sent; `interrupted` when the user stopped
    /// the run before its end, which leaves the verdict open.
    fn into_report(self, elapsed: Duration, interrupted: bool) -> Report {
        let had_the_event = self.had_the_event().cloned();
        let first_judges = self.first_judges();
        let opts = self.opts;
        let provider = self.plan.provider;
        let mut checks = Vec::new();
        if !self.attempts.is_empty() {
            checks.push(verdict::answers_2xx(&self.attempts, self.plan.signature_void));
        }
        let mut warnings = self.plan.warnings.clone();
        // Judged only of a run cut short (a probe that failed part way, or
        // ctrl-c): otherwise the whole run's reads are, below.
        let convicted_early = (self.unreadable.is_some() || interrupted)
            .then(|| self.convicted_before_the_end())
            .flatten();
        // A probe that failed part way leaves no state to judge by, unless
        // what it read before convicts: then the report holds those reads.
        let state = (self.read_before && (self.probe.is_some() || convicted_early.is_some())).then_some(self.trace);
        // A probe that failed part way was given: its check says what went wrong.
        if self.probe.is_none() && self.unreadable.is_none() {
            warnings.push(super::NOT_PROBED.into());
        }
        let restless = self.restless;
        match (&self.unreadable, &state) {
            // Nothing was sent: the reason is the whole verdict.
            _ if restless.is_some() => checks.extend(restless.clone()),
            // Reads of part of a run clear nothing; a duplicate they saw act
            // again convicts, as it would have in the whole run.
            _ if interrupted => {
                checks.push(verdict::run_completed(self.attempts.len(), self.total));
                checks.extend(convicted_early);
            }
            (Some(reason), _) => {
                checks.push(verdict::state_readable(reason, convicted_early.is_some()));
                checks.extend(convicted_early);
            }
            (None, Some(trace)) => {
                let content = if opts.fresh {
                    verdict::burst_acts_once(trace, opts.times as usize)
                } else {
                    verdict::duplicates_change_nothing(&self.attempts, trace, had_the_event.as_ref())
                };
                let settled = verdict::state_settled(trace, opts.settle, &self.attempts);
                // Reads taken while the state still moved can neither clear
                // the handler nor convict it (a clock as the probe moves on
                // every read), nor say whether it had seen the event before.
                // A fixture whose event an earlier one of the check sent
                // is not new to the handler, whatever --expect-effect says
                // of the events: seen acting once, it is expected to do
                // nothing now.
                let sent_earlier = matches!(had_the_event, Some(HadBefore::EarlierFixture(_)));
                if settled.passed && !opts.fresh {
                    if opts.expect_effect && !sent_earlier {
                        checks.extend(verdict::effect_unseen(
                            trace,
                            opts.settle,
                            &self.attempts,
                            had_the_event.is_some(),
                        ));
                    } else if had_the_event.is_none() {
                        warnings.extend(verdict::nothing_seen_to_act(trace, opts.settle, &self.attempts));
                    }
                }
                // An attempt 1 that failed and did nothing leaves the first
                // one answered 2xx to be the delivery, and the rest its
                // duplicates: a handler whose database was down once.
                let after_failures = (!first_judges && !opts.fresh)
                    .then(|| verdict::duplicates_after_the_first_success(&self.attempts, trace))
                    .flatten();
                checks.extend(
                    content
                        .filter(|_| first_judges)
                        .or(after_failures)
                        .filter(|_| settled.passed),
                );
                checks.push(settled);
            }
            (None, None) => {}
        }
        // How the attempts went out says nothing of a run stopped before
        // two did.
        let sent_several = self.attempts.len() > 1;
        if sent_several && opts.fresh && opts.times > 1 && opts.burst_width() == 1 {
            warnings.push(
                "--concurrency 1 sent the burst one copy at a time, so a check-then-insert race could not show; \
                 leave --concurrency out to send the whole burst at once"
                    .into(),
            );
        }
        if sent_several && opts.width() > 1 && !opts.fresh {
            warnings.push(
                "attempt 1 goes alone, so the concurrent attempts after it are duplicates of an event already \
                 handled; to see whether the first deliveries of a new event race, pass --fresh"
                    .into(),
            );
        }
        // A run that sent nothing did not send one attempt only.
        if opts.times == 1 && !opts.fresh && restless.is_none() {
            warnings.push(super::ONE_ATTEMPT.into());
        }
        if let Some(step) = self.reordered.filter(|_| state.is_some()) {
            warnings.push(verdict::reordered(&self.attempts, step));
        }
        if let Some(provider) = provider {
            warnings.extend(verdict::slow_answers(&self.attempts, provider));
        }
        warnings.extend(verdict::refused_signature(&self.attempts, self.plan.signed_with()));
        warnings.extend(verdict::refused_recorded_signature(
            &self.attempts,
            self.plan.unwarned_signature,
            opts.secret.as_ref().map(|secret| &secret.from),
        ));
        Report {
            idempotent: verdict::decide(&checks),
            checks,
            warnings,
            provider: provider.map(|p| p.name().to_string()),
            event_key: self.plan.recorded.event_key.clone(),
            // Advice for a dedup store, which a run that sent nothing (its
            // probe moved first) has no verdict to need.
            retry_window: (provider.filter(|_| !self.attempts.is_empty())).map(|p| p.retry_window().to_string()),
            target: self.plan.url(),
            times: opts.times,
            concurrency: opts.most_at_once(),
            fresh: opts.fresh,
            signed: self.plan.signed(),
            // As the attempts were sent: a `--body-file` may carry another
            // event. With none sent (a probe that moved first), as planned.
            event_type: match self.attempts.first() {
                Some(first) => first.request.event_type.clone(),
                None => self.plan.recorded.event_type.clone(),
            },
            edits: self.plan.edits.clone(),
            state,
            attempts: self.attempts,
            elapsed,
            recorded_as: Vec::new(),
        }
    }
}

/// Files a run holds open besides its attempts' sockets: the history, its
/// WAL and inbox, the probe's connection or pipes, the terminal.
const FILES_BESIDE_ATTEMPTS: u64 = 32;

/// Refuses a width of attempts in flight that the open-file `limit` leaves
/// no room for (both binaries raise it as far as they may at start): the
/// attempts past it would fail, and the handler be blamed.
fn fits_open_files(opts: &ReplayOptions, limit: Option<u64>) -> Result<(), ReplayError> {
    let width = opts.most_at_once();
    let Some(limit) = limit else {
        return Ok(());
    };
    let fits = limit.saturating_sub(FILES_BESIDE_ATTEMPTS);
    // One attempt at a time is as narrow as a run goes: nothing to advise.
    if width <= 1 || u64::from(width) <= fits {
        return Ok(());
    }
    Err(ReplayError::OpenFiles {
        width,
        limit,
        fits: fits.max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_timeout_shorter_than_a_connect_does_not_call_the_target_down() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        // A name is looked up on another thread, which 1 ns may not wait for.
        let endpoint = Endpoint {
            scheme: crate::target::Scheme::Http,
            host: "localhost".into(),
            port: listener.local_addr().unwrap().port(),
        };
        let pool = Pool::open(&endpoint, Duration::from_nanos(1), false).await;
        assert!(pool.is_ok(), "{:?}", pool.err());
        drop(listener);
        let err = Pool::open(&endpoint, Duration::from_nanos(1), false).await.err();
        assert!(
            matches!(err, Some(ReplayError::TargetDown { .. })),
            "a port nothing listens on is down: {err:?}"
        );
    }

    #[test]
    fn a_burst_wider_than_the_open_file_limit_is_refused_before_it_is_sent() {
        let burst = ReplayOptions {
            times: 300,
            fresh: true,
            ..ReplayOptions::default()
        };
        assert!(fits_open_files(&burst, Some(20_000)).is_ok());
        assert!(fits_open_files(&burst, None).is_ok(), "unlimited");
        let err = fits_open_files(&burst, Some(64)).unwrap_err().to_string();
        assert_eq!(
            err,
            "300 attempts at once need as many sockets, and this process may open 64 files: \
             raise the limit (ulimit -n) or pass --concurrency 32"
        );
        let narrower = ReplayOptions {
            concurrency: Some(32),
            ..burst.clone()
        };
        assert!(fits_open_files(&narrower, Some(64)).is_ok());
        // Only as many attempts as there are can be in flight.
        let three = ReplayOptions {
            times: 3,
            fresh: false,
            concurrency: Some(100),
            ..burst
        };
        assert!(fits_open_files(&three, Some(64)).is_ok());
        assert!(
            fits_open_files(&ReplayOptions::default(), Some(24)).is_ok(),
            "one at a time"
        );
    }
}
