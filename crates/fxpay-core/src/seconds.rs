//! How a number of seconds (or a rate per second) is written in a message: as Rust prints it,
//! in full, unless that would be unreadable.

/// A number of seconds as an error message shows it: as written when it is of a usual size,
/// in exponent form otherwise (`1e300`, not three hundred digits), `NaN` and `inf` as such.
pub fn seconds_text(seconds: f64) -> String {
    if seconds.is_finite() && seconds.abs() < 1e16 && (seconds == 0.0 || seconds.abs() >= 1e-6) {
        format!("{seconds}")
    } else {
        format!("{seconds:?}")
    }
}
