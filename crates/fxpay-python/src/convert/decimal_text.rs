//! A Decimal's text written on the stack, for the Python `Decimal` a field reads as.
use rust_decimal::Decimal;

/// A Decimal's text (what its `Display` writes: its digits, a point before the last `scale`
/// of them, a sign if it is below zero), written on the stack: no allocation, and a tenth of
/// the instructions of `to_string` (bench/README.md, "Every field read").
pub struct DecimalText {
    /// A sign, "0.", and at most 29 digits (96 bits) padded with zeros to a scale of 28.
    bytes: [u8; 64],
}

impl Default for DecimalText {
    fn default() -> Self {
        DecimalText { bytes: [0; 64] }
    }
}

impl DecimalText {
    pub fn write(&mut self, d: &Decimal) -> &str {
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(d.mantissa().unsigned_abs()).as_bytes();
        let scale = usize::try_from(d.scale()).unwrap_or(usize::MAX);
        let mut at = 0;
        let mut push = |bytes: &[u8]| {
            if let Some(to) = self.bytes.get_mut(at..at + bytes.len()) {
                to.copy_from_slice(bytes);
                at += bytes.len();
            }
        };
        // Zero has no sign, as `Display` writes it: -0.00 is "0.00".
        if d.is_sign_negative() && !d.is_zero() {
            push(b"-");
        }
        match digits.len().checked_sub(scale) {
            Some(0) | None => {
                // All the digits are after the point: "0.", then the zeros the scale asks.
                push(b"0.");
                for _ in digits.len()..scale {
                    push(b"0");
                }
                push(digits);
            }
            Some(whole) if whole == digits.len() => push(digits),
            Some(whole) => {
                push(&digits[..whole]);
                push(b".");
                push(&digits[whole..]);
            }
        }
        // Only ASCII was written.
        std::str::from_utf8(&self.bytes[..at]).unwrap_or_default()
    }
}
