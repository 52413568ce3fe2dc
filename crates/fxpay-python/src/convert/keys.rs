//! The keys of the JSON objects `raw` makes, each `str` made once and handed out again:
//! answers of one kind repeat their keys, and a key made anew for every object costs an
//! allocation, a UTF-8 check and a hash (a `str` keeps its hash once a dict has asked, so a
//! kept key is hashed once). A small table indexed by the key's bytes, the way orjson keeps
//! its keys; a key it does not hold (too long, its slot taken by another) is made as before.
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::sync::Mutex;

/// How many keys are kept: a slot per key; two keys that fall in one slot take turns.
const SLOTS: usize = 512;
/// The longest key kept, in bytes (the service's keys are at most 22).
const LONGEST: usize = 32;

struct Kept {
    len: usize,
    bytes: [u8; LONGEST],
    key: Py<PyString>,
}

/// Taken only with the GIL held and nothing inside calling Python code, so no other thread
/// waits on it, and a fork (made while a thread holds the GIL) never finds it taken.
static KEPT: Mutex<Vec<Option<Kept>>> = Mutex::new(Vec::new());

/// `s` as a Python `str`: the one kept for these bytes, or a new one (then kept).
pub fn key<'py>(py: Python<'py>, s: &str) -> Bound<'py, PyString> {
    let bytes = s.as_bytes();
    if bytes.len() > LONGEST {
        return PyString::new(py, s);
    }
    // Never taken by anyone else while this thread holds the GIL; poisoned (a panic in
    // `PyString::new`), the table is left alone from then on.
    let Ok(mut kept) = KEPT.try_lock() else {
        return PyString::new(py, s);
    };
    if kept.is_empty() {
        kept.resize_with(SLOTS, || None);
    }
    let Some(slot) = kept.get_mut(slot_of(bytes)) else {
        return PyString::new(py, s);
    };
    if let Some(k) = slot
        .as_ref()
        .filter(|k| k.bytes.get(..k.len) == Some(bytes))
    {
        return k.key.bind(py).clone();
    }
    let made = PyString::new(py, s);
    let mut copy = [0u8; LONGEST];
    copy[..bytes.len()].copy_from_slice(bytes);
    // The key it replaces (if any) is released here, with the GIL held: freeing a `str`
    // runs no Python code.
    *slot = Some(Kept {
        len: bytes.len(),
        bytes: copy,
        key: made.clone().unbind(),
    });
    made
}

/// The slot of a key: its length and its bytes, 8 at a time, mixed (FxHash's multiplier).
fn slot_of(bytes: &[u8]) -> usize {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = bytes.len() as u64;
    for chunk in bytes.chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    // The high bits are the best mixed.
    (h >> 40) as usize % SLOTS
}
