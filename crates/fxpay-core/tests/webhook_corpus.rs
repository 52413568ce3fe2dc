//! Replays the fuzz seed corpus (`fuzz/corpus/deal_created/`) through the webhook parser:
//! no input may panic, every `valid-*` seed must be accepted and every `bad-*` seed refused.
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

#[path = "../../../fuzz/fuzz_targets/input.rs"]
mod input;

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/deal_created");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("a directory entry").path();
            let name = path
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            let data = std::fs::read(&path).expect("a readable corpus file");
            (name, data)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn every_seed_is_handled_and_valid_seeds_parse() {
    let files = corpus();
    assert!(files.len() >= 20, "only {} corpus files", files.len());
    let (mut valid, mut bad) = (0, 0);
    for (name, data) in &files {
        let case = input::decode(data);
        let headers = case.header_refs();
        let result = catch_unwind(AssertUnwindSafe(|| {
            fxpay_core::parse_deal_created(case.body, &headers, case.nonce.as_deref())
        }));
        let result = result.unwrap_or_else(|_| panic!("{name}: the parser panicked"));
        if name.starts_with("valid-") {
            valid += 1;
            let (ev, _raw) = result.unwrap_or_else(|e| panic!("{name}: refused: {e}"));
            // A UUID in the 36-character hyphenated form, as the parser checks it.
            let id = &ev.process_id;
            assert!(
                id.len() == 36 && uuid::Uuid::try_parse(id).is_ok(),
                "{name}"
            );
        } else if name.starts_with("bad-") {
            bad += 1;
            assert!(result.is_err(), "{name}: accepted");
        }
    }
    assert!(
        valid >= 10 && bad >= 10,
        "{valid} valid and {bad} bad seeds"
    );
}

#[test]
fn nonce_seeds_carry_their_nonce() {
    let files = corpus();
    let with_nonce = files
        .iter()
        .filter(|(name, data)| name.starts_with("valid-") && data.starts_with(b"N"))
        .count();
    assert!(with_nonce >= 2, "{with_nonce} valid seeds with a nonce");
    // Dropping the header of a valid nonce seed must make it fail verification.
    for (name, data) in files
        .iter()
        .filter(|(n, d)| n.starts_with("valid-") && d.starts_with(b"N"))
    {
        let case = input::decode(data);
        let r = fxpay_core::parse_deal_created(case.body, &[], case.nonce.as_deref());
        assert!(
            matches!(r, Err(fxpay_core::Error::WebhookVerification(_))),
            "{name}: {r:?}"
        );
    }
}
