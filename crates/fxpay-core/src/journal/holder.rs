//! Who holds a claim: `host/pid/token`, and whether such a holder is known to be dead.
//!
//! The host part is the host name and (on Linux) the boot id, so a holder on another
//! machine, or from before a reboot, is never taken for a local process. A local holder whose
//! process has exited is dead at once; any other holder is judged by its lease alone.
use crate::runtime::fork::PerProcess;

/// Whether a claim's holder is known to be gone.
pub trait HolderCheck: Send + Sync {
    fn is_dead(&self, holder: &str) -> bool;
}

/// Holders are judged by their lease alone (a store shared between machines).
pub struct LeaseOnly;

impl HolderCheck for LeaseOnly {
    fn is_dead(&self, _holder: &str) -> bool {
        false
    }
}

/// A holder on this host whose process has exited is dead (a store on one machine).
pub struct LocalProcesses;

impl HolderCheck for LocalProcesses {
    fn is_dead(&self, holder: &str) -> bool {
        let mut parts = holder.rsplitn(3, '/');
        let (Some(token), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            return false;
        };
        if host != host_id() {
            return false;
        }
        if pid == std::process::id() {
            // This process's pid, another process's token: that one has exited.
            return token != process_token();
        }
        !process_alive(pid)
    }
}

#[cfg(unix)]
fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: kill with signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(not(unix))]
fn process_alive(_pid: u32) -> bool {
    true
}

/// This machine: its host name, and its boot id where the system has one.
pub(crate) fn host_id() -> &'static str {
    // Per process, like the token below: a `OnceLock` whose first use another thread had
    // begun when the process forked would make the child wait for ever.
    static HOST: PerProcess<String> = PerProcess::empty();
    HOST.get_or_make(|| {
        let name = host_name().replace('/', "_");
        match std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
            Ok(boot) => format!("{name}~{}", boot.trim()),
            Err(_) => name,
        }
    })
}

#[cfg(unix)]
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that much.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(not(unix))]
fn host_name() -> String {
    std::env::var("COMPUTERNAME").unwrap_or_else(|_| "localhost".into())
}

/// A random token for this process, made anew in a forked child. Kept without a lock: a lock
/// that another thread of the parent held at the fork stays held in the child for ever (a
/// child forked while threads made keyed calls hung here, 1 in 1,200 forks).
fn process_token() -> &'static str {
    static TOKEN: PerProcess<String> = PerProcess::empty();
    TOKEN.get_or_make(|| crate::auth::authorize::random_token(9).unwrap_or_else(|_| "t".into()))
}

/// This process as a holder.
pub(crate) fn me() -> &'static str {
    // Made once per process (a forked child has its own pid and token).
    static ME: PerProcess<String> = PerProcess::empty();
    ME.get_or_make(|| format!("{}/{}/{}", host_id(), std::process::id(), process_token()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive() {
        assert!(!LocalProcesses.is_dead(me()));
    }

    #[test]
    fn an_exited_local_process_is_dead() {
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id();
        child.wait().expect("wait");
        let holder = format!("{}/{pid}/x", host_id());
        assert!(LocalProcesses.is_dead(&holder));
        // The same holder is not judged dead by a store of many machines.
        assert!(!LeaseOnly.is_dead(&holder));
    }

    #[test]
    fn another_host_or_a_malformed_holder_is_never_dead() {
        assert!(!LocalProcesses.is_dead("elsewhere/999999/x"));
        assert!(!LocalProcesses.is_dead("garbage"));
        assert!(!LocalProcesses.is_dead(&format!("{}/notapid/x", host_id())));
    }

    #[test]
    fn this_pid_with_another_token_is_an_exited_process() {
        let holder = format!("{}/{}/other", host_id(), std::process::id());
        assert!(LocalProcesses.is_dead(&holder));
    }
}
