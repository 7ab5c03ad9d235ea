//! Root package of the Tessera workspace: owns the cross-crate tests in `tests/` and the benches in `benches/`.
