//! End-to-end test package for PortPreview; the tests live in `tests/`.
