//! Python values and objects into the core's, one rule per kind, each a `TypeError` naming
//! the parameter for a wrong type (a `bool` included wherever a number is wanted; the same
//! rule for a `Client` argument and a model field) and leaving the value's range to the core
//! (an `InvalidRequestError` or `ConfigurationError` naming it):
//! - `values.rs`: text ([`text`], [`opt_text`]) and counts ([`int`]); amounts
//!   ([`amount_text`], [`decimal_from_py`]): `Decimal`, `int`, `str` or `float` (its shortest
//!   repr), kept exactly; seconds ([`seconds`]); paths ([`path`], `str` or `os.PathLike`);
//!   instants ([`instant_from_py`]); JSON values with exact Decimals ([`py_to_value`]);
//! - `json_text.rs`: JSON text straight into Python objects, numbers exact ([`json_text_to_py`]);
//! - `keys.rs`: the keys of those objects, each `str` made once and kept;
//! - `decimal_text.rs`: a Decimal's text on the stack, for [`decimal_to_py`];
//! - `objects.rs`: the objects Python hands in, checked and wrapped for the core: token
//!   stores ([`objects::token_store`]) and cassettes ([`objects::cassette`]).
//!
//! Elsewhere, by design: a model's fields convert by these rules, kind by kind, in
//! `models/class.rs` (`field_from_py`); a journal in `journal.rs` (`PyJournal::from_py`),
//! whose own functions take one (here it would make an import circle).
mod decimal_text;
mod json_text;
mod keys;
pub mod objects;
mod values;

pub use json_text::json_text_to_py;
pub use values::*;
