//! The process's signals held off a thread while it talks to Redis.
//!
//! The journal's connection has read and write timeouts (`SO_RCVTIMEO`, `SO_SNDTIMEO`), and
//! Linux never restarts a socket call with a timeout that a signal handler interrupted, not
//! even for a handler installed with `SA_RESTART`: it fails with `EINTR`. Python installs
//! its handlers without it anyway, and a Python process has many (a server's `SIGTERM`,
//! gunicorn's or tornado's `SIGCHLD`, pytest-timeout's `SIGALRM`, Ctrl-C). A command whose
//! answer was being read when one arrived was sent: it cannot be sent again, and failing it
//! leaves a claim made for nothing (found by CI: `RedisJournal.swap() failed:
//! ConnectionError: Interrupted system call`).
//!
//! So, while a thread waits for Redis, the signals that arrive from outside stay pending: the
//! kernel gives a process's signal to another thread, or to this one once it is done (a
//! command takes its round trip, at most the journal's timeout). A thread's own faults
//! (`SIGSEGV`, `SIGBUS`, `SIGFPE`, `SIGILL`, `SIGTRAP`, `SIGSYS`) and `SIGABRT` are never
//! held: blocked, they would end the process without their handlers.

/// While alive, the signals from outside are held off this thread; dropped, the thread's
/// mask is what it was.
pub(super) struct Held {
    #[cfg(unix)]
    before: libc::sigset_t,
    /// The mask given back is this thread's: never sent to another.
    _here: std::marker::PhantomData<*const ()>,
}

/// The signals a thread raises on itself, never held.
#[cfg(unix)]
const NEVER: [libc::c_int; 7] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
    libc::SIGABRT,
];

impl Held {
    pub(super) fn new() -> Held {
        #[cfg(unix)]
        {
            // SAFETY: sigset_t is plain data, filled by sigfillset/sigdelset before use;
            // pthread_sigmask changes only this thread's mask, given back in Drop.
            unsafe {
                let mut held: libc::sigset_t = std::mem::zeroed();
                let mut before: libc::sigset_t = std::mem::zeroed();
                libc::sigfillset(&mut held);
                for s in NEVER {
                    libc::sigdelset(&mut held, s);
                }
                libc::pthread_sigmask(libc::SIG_BLOCK, &held, &mut before);
                Held {
                    before,
                    _here: std::marker::PhantomData,
                }
            }
        }
        #[cfg(not(unix))]
        Held {
            _here: std::marker::PhantomData,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        #[cfg(unix)]
        // SAFETY: the mask read in `new`, on this same thread (Held is not Send).
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.before, std::ptr::null_mut());
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn blocked(s: libc::c_int) -> bool {
        // SAFETY: reads this thread's mask only.
        unsafe {
            let mut now: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            libc::sigismember(&now, s) == 1
        }
    }

    /// Held: the signals from outside are blocked, a thread's own faults never; dropped, the
    /// mask is as before (a signal the caller had blocked stays blocked).
    #[test]
    fn signals_from_outside_are_held_and_given_back() {
        std::thread::spawn(|| {
            // SAFETY: this thread's mask only.
            unsafe {
                let mut mine: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut mine);
                libc::sigaddset(&mut mine, libc::SIGUSR2);
                libc::pthread_sigmask(libc::SIG_BLOCK, &mine, std::ptr::null_mut());
            }
            {
                let _held = Held::new();
                for s in [libc::SIGINT, libc::SIGTERM, libc::SIGCHLD, libc::SIGALRM] {
                    assert!(blocked(s), "{s} not held");
                }
                for s in NEVER {
                    assert!(!blocked(s), "{s} held");
                }
            }
            for s in [libc::SIGINT, libc::SIGTERM, libc::SIGCHLD, libc::SIGALRM] {
                assert!(!blocked(s), "{s} still held");
            }
            assert!(blocked(libc::SIGUSR2), "the caller's own mask was lost");
        })
        .join()
        .expect("the test thread panicked");
    }
}
