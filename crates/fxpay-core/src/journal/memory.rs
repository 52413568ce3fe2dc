//! A journal kept in this process's memory (`fxpay.MemoryJournal`): entries by key, as
//! values, not texts. A keyed call on it never leaves Rust (no climb into Python, no entry
//! serialised), which is what makes it the floor of a keyed call's cost (issue 56).
//!
//! Fork: a forked child takes a copy of the entries, never the parent's lock (a thread of
//! the parent may hold it at the fork, and that thread does not exist in the child). The
//! copy is the one [`JournalStore::before_fork`] took in the forking thread (Python's
//! `os.register_at_fork` hook runs it for `os.fork()` and multiprocessing); a child forked
//! without it starts with no entries. Entries end with their process anyway, and a child
//! shares none of its parent's later ones.
use super::entry::Entry;
use super::holder::{HolderCheck, LocalProcesses};
use super::store::JournalStore;
use crate::error::Result;
use crate::runtime::fork::PerProcess;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The entries, with the order their keys were first claimed in.
#[derive(Clone, Default)]
struct Entries {
    /// foldhash, not SipHash: cheaper per lookup, and seeded at random per process.
    by_key: HashMap<String, (u64, Entry), foldhash::fast::RandomState>,
    next: u64,
}

/// A journal's storage in this process's memory; `single_host` (a pending key whose holder
/// process exited is gone at once).
pub struct MemoryStore {
    /// This process's entries (a forked child makes its own, from `forked`).
    here: PerProcess<Mutex<Entries>>,
    /// The copy `before_fork` took for the child.
    forked: Mutex<Option<Entries>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            here: PerProcess::empty(),
            forked: Mutex::new(None),
        }
    }
}

impl MemoryStore {
    fn map(&self) -> MutexGuard<'_, Entries> {
        let here = self.here.get_or_make(|| {
            // Made once per process: the first, or a child (from its parent's copy). Only
            // the forking thread's `before_fork` holds `forked`, and not across the fork.
            Mutex::new(take(&self.forked).unwrap_or_default())
        });
        lock(here)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the map half-changed: every change is
    // one insert.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn take<T>(m: &Mutex<Option<T>>) -> Option<T> {
    lock(m).take()
}

impl JournalStore for MemoryStore {
    /// The entries of `keys`, or every entry in the order their keys were first claimed.
    fn entries(&self, keys: Option<&[String]>) -> Result<Vec<Entry>> {
        let map = self.map();
        if let Some(keys) = keys {
            return Ok(keys
                .iter()
                .filter_map(|k| map.by_key.get(k).map(|(_, e)| e.clone()))
                .collect());
        }
        let mut all: Vec<&(u64, Entry)> = map.by_key.values().collect();
        all.sort_by_key(|(order, _)| *order);
        Ok(all.into_iter().map(|(_, e)| e.clone()).collect())
    }

    fn get(&self, key: &str) -> Result<Option<Entry>> {
        Ok(self.map().by_key.get(key).map(|(_, e)| e.clone()))
    }

    fn claim(&self, entry: &Entry) -> Result<Option<Entry>> {
        let mut map = self.map();
        if let Some((_, stored)) = map.by_key.get(&entry.key) {
            // Whatever is stored is another call's, even if equal to `entry`.
            return Ok(Some(stored.clone()));
        }
        let order = map.next;
        map.next += 1;
        map.by_key.insert(entry.key.clone(), (order, entry.clone()));
        Ok(None)
    }

    fn swap(&self, old: &Entry, new: &Entry) -> Result<bool> {
        let mut map = self.map();
        match map.by_key.get_mut(&old.key) {
            Some((_, stored)) if stored == old && new.key == old.key => {
                *stored = new.clone();
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn find(&self, result: &str) -> Result<Option<Entry>> {
        let map = self.map();
        let mut found: Vec<&(u64, Entry)> = map
            .by_key
            .values()
            .filter(|(_, e)| e.result.as_deref() == Some(result))
            .collect();
        found.sort_by_key(|(order, _)| *order);
        Ok(found.first().map(|(_, e)| e.clone()))
    }

    fn holders(&self) -> &dyn HolderCheck {
        &LocalProcesses
    }

    fn answers_at_once(&self) -> bool {
        true
    }

    /// Takes the copy a child forked next starts from (run by the thread about to fork).
    fn before_fork(&self) {
        let copy = self.map().clone();
        *lock(&self.forked) = Some(copy);
    }

    /// Drops the copy `before_fork` took (the parent, after the fork).
    fn after_fork_in_parent(&self) {
        take(&self.forked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::entry::State;

    fn entry(key: &str, state: State, result: Option<&str>) -> Entry {
        Entry {
            key: key.into(),
            operation: "create_quote".into(),
            fingerprint: "f".into(),
            state,
            result: result.map(str::to_string),
            deal_id: None,
            holder: "h/1/t".into(),
            lease_until: 2,
            created_at: 1,
            updated_at: 1,
            error: None,
            response: None,
            nonce: None,
            request: None,
        }
    }

    #[test]
    fn a_key_is_claimed_once_and_swapped_only_from_what_is_stored() {
        let s = MemoryStore::default();
        let a = entry("k", State::Pending, None);
        assert_eq!(s.claim(&a).expect("memory"), None);
        assert_eq!(
            s.claim(&entry("k", State::Pending, Some("x")))
                .expect("memory"),
            Some(a.clone())
        );
        let done = entry("k", State::Done, Some("q1"));
        assert!(!s
            .swap(&entry("k", State::Unknown, None), &done)
            .expect("memory"));
        assert!(s.swap(&a, &done).expect("memory"));
        assert!(
            !s.swap(&a, &done).expect("memory"),
            "the stored entry is no longer `a`"
        );
        assert_eq!(s.get("k").expect("memory"), Some(done.clone()));
        assert_eq!(s.find("q1").expect("memory"), Some(done));
        assert_eq!(s.find("q2").expect("memory"), None);
        assert_eq!(s.get("other").expect("memory"), None);
    }

    #[test]
    fn a_swap_to_another_key_is_refused() {
        let s = MemoryStore::default();
        let a = entry("k", State::Pending, None);
        s.claim(&a).expect("memory");
        assert!(!s
            .swap(&a, &entry("j", State::Done, Some("q")))
            .expect("memory"));
        assert_eq!(s.get("j").expect("memory"), None);
        assert_eq!(s.get("k").expect("memory"), Some(a));
    }

    #[test]
    fn entries_come_in_claim_order() {
        let s = MemoryStore::default();
        for (k, st) in [
            ("c", State::Unknown),
            ("a", State::Done),
            ("b", State::Pending),
        ] {
            s.claim(&entry(k, st, None)).expect("memory");
        }
        s.swap(
            &entry("a", State::Done, None),
            &entry("a", State::Released, None),
        )
        .expect("memory");
        let keys: Vec<String> = s
            .entries(None)
            .expect("memory")
            .into_iter()
            .map(|e| e.key)
            .collect();
        assert_eq!(keys, ["c", "a", "b"]);
    }

    #[test]
    fn the_first_result_claimed_is_found_first() {
        let s = MemoryStore::default();
        s.claim(&entry("z", State::Done, Some("r")))
            .expect("memory");
        s.claim(&entry("a", State::Done, Some("r")))
            .expect("memory");
        assert_eq!(
            s.find("r").expect("memory").map(|e| e.key),
            Some("z".into())
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_child_forked_while_a_thread_holds_the_lock_reads_the_copy_and_does_not_hang() {
        use std::sync::mpsc;
        let s = std::sync::Arc::new(MemoryStore::default());
        s.claim(&entry("before", State::Done, Some("q")))
            .expect("memory");
        s.before_fork(); // the forking thread's copy, as Python's fork hook takes it
        s.claim(&entry("after", State::Done, Some("r")))
            .expect("memory");
        let (held, release) = (mpsc::channel(), mpsc::channel::<()>());
        let holder = {
            let s = s.clone();
            let (tell, wait) = (held.0, release.1);
            std::thread::spawn(move || {
                let _locked = s.map();
                tell.send(()).expect("memory");
                let _ = wait.recv();
            })
        };
        held.1.recv().expect("memory");
        // SAFETY: the child only reads the store and ends with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let ok = s.get("before").expect("memory").is_some()
                && s.get("after").expect("memory").is_none()
                && s.claim(&entry("child", State::Pending, None))
                    .expect("memory")
                    .is_none();
            // SAFETY: ends the child without running the test harness's exit code.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let done = loop {
            // SAFETY: polls the child made above.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break true;
            }
            if std::time::Instant::now() > deadline {
                // SAFETY: the child made above, hung.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut status, 0);
                }
                break false;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        release.0.send(()).expect("memory");
        holder.join().expect("memory");
        assert!(done, "the child hung on the parent's lock");
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child: {status}"
        );
        s.after_fork_in_parent();
        assert!(
            s.get("child").expect("memory").is_none(),
            "the child's claim is its own"
        );
        assert!(s.get("after").expect("memory").is_some());
    }
}
