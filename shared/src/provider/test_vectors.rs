//! The provider test vectors (`shared/testdata/provider_vectors.json`),
//! each confirmed against the provider's official SDK, for unit tests.

use std::sync::OnceLock;

use serde_json::Value;

use crate::message::Header;

/// The whole vectors file.
pub(crate) fn all() -> &'static Value {
    static VECTORS: OnceLock<Value> = OnceLock::new();
    VECTORS.get_or_init(|| serde_json::from_str(include_str!("../../testdata/provider_vectors.json")).unwrap())
}

/// One provider's vector, e.g. `vector("stripe")`.
pub(crate) fn vector(name: &str) -> &'static Value {
    &all()[name]
}

/// A string field of a vector.
pub(crate) fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field].as_str().unwrap_or_else(|| panic!("vector field {field}"))
}

/// A JSON object of header names and values, in file order.
pub(crate) fn headers(object: &Value) -> Vec<Header> {
    object
        .as_object()
        .unwrap()
        .iter()
        .map(|(n, v)| Header::new(n.as_str(), v.as_str().unwrap().as_bytes()))
        .collect()
}

/// `SystemTime` at a unix timestamp.
pub(crate) fn at(secs: u64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)
}

/// The Twilio vector's parameters as a form body, in reverse order, so a
/// signer must sort them.
pub(crate) fn twilio_form() -> Vec<u8> {
    let params = vector("twilio")["params"].as_object().unwrap();
    let pairs: Vec<String> = params
        .iter()
        .rev()
        .map(|(n, v)| format!("{n}={}", v.as_str().unwrap().replace('+', "%2B")))
        .collect();
    pairs.join("&").into_bytes()
}

/// A Mailgun body around the vector's signature object.
pub(crate) fn mailgun_body(signature: &Value) -> Vec<u8> {
    let body = serde_json::json!({"signature": signature, "event-data": {"id": "CPgfbmQMTCKtHW6uIWtuVe", "event": "delivered"}});
    serde_json::to_vec(&body).unwrap()
}
