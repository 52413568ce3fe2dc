//! SHA-256, from the aws-lc-rs that rustls already links: its assembly picks the CPU's fastest
//! path (SHA extensions, AVX2, SSSE3), where the `sha2` crate on x86 without SHA extensions falls
//! back to portable Rust, about 2,000 instructions a block. The same digest either way: a
//! journal's stored fingerprints do not change.
use aws_lc_rs::digest::{self, SHA256};

/// A SHA-256 being computed: `update` with each part, then `finish`.
pub(crate) struct Sha256(digest::Context);

impl Sha256 {
    pub(crate) fn new() -> Self {
        Sha256(digest::Context::new(&SHA256))
    }

    pub(crate) fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    pub(crate) fn finish(self) -> [u8; 32] {
        let mut out = [0u8; 32];
        out.copy_from_slice(self.0.finish().as_ref());
        out
    }

    /// The SHA-256 of `data`.
    pub(crate) fn digest(data: &[u8]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(data);
        h.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::Sha256;

    fn hex(d: [u8; 32]) -> String {
        data_encoding::HEXLOWER.encode(&d)
    }

    #[test]
    fn the_digest_is_sha256_for_the_fips_180_vectors() {
        // FIPS 180-2, appendix B.1 and B.2, and the empty message.
        assert_eq!(
            hex(Sha256::digest(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(Sha256::digest(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        assert_eq!(
            hex(Sha256::digest(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn parts_given_one_by_one_digest_as_their_concatenation() {
        let mut h = Sha256::new();
        for part in [&b"ab"[..], b"", b"c"] {
            h.update(part);
        }
        assert_eq!(h.finish(), Sha256::digest(b"abc"));
    }
}
