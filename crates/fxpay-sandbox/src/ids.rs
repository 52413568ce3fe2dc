//! Random identifiers, secrets and tokens.
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

/// `n` random bytes from the operating system.
fn random_bytes(n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    if getrandom::fill(&mut buf).is_err() {
        // The OS generator never fails on supported platforms; fall back to v4 UUID bytes,
        // which come from the same source through another path.
        for chunk in buf.chunks_mut(16) {
            let u = uuid::Uuid::new_v4();
            let bytes = u.as_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
    buf
}

/// A URL-safe random token with 256 bits of entropy (less a hundredth of a bit) that never
/// starts with `-`: a token passed on a command line as `--option <token>` would otherwise be
/// taken for an option one time in 64 (argparse does).
pub fn token() -> String {
    loop {
        let t = URL_SAFE_NO_PAD.encode(random_bytes(32));
        if !t.starts_with('-') {
            return t;
        }
    }
}

/// A short lower-case hex tag (for readable client ids).
pub fn hex_tag(bytes: usize) -> String {
    random_bytes(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A new v4 UUID, hyphenated lower case.
pub fn uuid() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
}

/// A new v4 UUID for an answer's `x-request-id`, from rand's thread-local generator (ChaCha,
/// seeded from the OS) rather than a system call: every answer carries one, and `getrandom`
/// was one of the three system calls of a request (with `recvfrom` and `writev`). Request ids
/// correlate log lines; they are not secrets, and no resource id or token comes from here.
/// Only the server's runtime threads draw them, and a forked child starts new threads, so two
/// processes never continue one stream.
pub fn request_id() -> uuid::Uuid {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_and_distinct() {
        let a = token();
        assert_eq!(a.len(), 43);
        assert_ne!(a, token());
        assert_eq!(hex_tag(4).len(), 8);
        assert_eq!(uuid().len(), 36);
    }

    /// Request ids are RFC 9562 version 4 UUIDs, and 20,000 of them (from two threads) are
    /// distinct.
    #[test]
    fn request_ids_are_v4_and_distinct() {
        let draw = || (0..10_000).map(|_| request_id()).collect::<Vec<_>>();
        let other = std::thread::spawn(draw);
        let mut all = draw();
        all.extend(other.join().expect("the other thread draws its ids"));
        for id in &all {
            assert_eq!(id.get_version(), Some(uuid::Version::Random), "{id}");
            assert_eq!(id.get_variant(), uuid::Variant::RFC4122, "{id}");
        }
        let distinct: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), 20_000);
    }

    /// One token in 64 would start with `-` without the redraw: 4,000 tokens all pass by
    /// chance with probability (63/64)^4000, below 1e-27.
    #[test]
    fn no_token_starts_with_a_dash() {
        for _ in 0..4000 {
            let t = token();
            assert!(!t.starts_with('-'), "{t}");
            assert_eq!(t.len(), 43);
        }
    }
}
