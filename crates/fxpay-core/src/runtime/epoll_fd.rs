//! Finds the epoll descriptor of a tokio runtime just built on this thread, so that an event
//! loop can watch it (`loop.add_reader`) and run the runtime when it has work.
//!
//! tokio does not expose its I/O driver's descriptor. It is found by listing this process's
//! descriptors before and after the runtime is built: the new `anon_inode:[eventpoll]` ones
//! are the driver's (mio keeps a duplicate of it for its registry). Each candidate is then
//! checked: the driver's epoll watches the driver's waker, an eventfd made in the same
//! build. Anything unsure (no `/proc`, two unrelated epoll instances made meanwhile by
//! another thread) gives None, and the caller keeps to its other path.

/// The descriptors of this process that are epoll instances, and those that are eventfds.
#[cfg(target_os = "linux")]
fn snapshot() -> Option<(Vec<i32>, Vec<i32>)> {
    let (mut epolls, mut eventfds) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir("/proc/self/fd").ok()?.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        match std::fs::read_link(entry.path())
            .ok()
            .as_deref()
            .and_then(|l| l.to_str())
        {
            Some("anon_inode:[eventpoll]") => epolls.push(fd),
            Some("anon_inode:[eventfd]") => eventfds.push(fd),
            _ => {}
        }
    }
    Some((epolls, eventfds))
}

/// The descriptors an epoll instance watches (`tfd:` lines of its `/proc/self/fdinfo`).
#[cfg(target_os = "linux")]
fn watched(epoll: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/self/fdinfo/{epoll}"))
        .map(|info| {
            info.lines()
                .filter_map(|l| {
                    l.strip_prefix("tfd:")?
                        .split_whitespace()
                        .next()?
                        .parse()
                        .ok()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Builds a runtime with `build` and returns it with its driver's epoll descriptor, if that
/// one is found for sure.
#[cfg(target_os = "linux")]
pub(crate) fn build_and_find<R>(build: impl FnOnce() -> Option<R>) -> Option<(R, Option<i32>)> {
    let before = snapshot();
    let rt = build()?;
    let found = before.and_then(|(epolls, eventfds)| {
        let (now_epolls, now_eventfds) = snapshot()?;
        let fresh_waker: Vec<i32> = now_eventfds
            .into_iter()
            .filter(|f| !eventfds.contains(f))
            .collect();
        let mut drivers = now_epolls
            .into_iter()
            .filter(|f| !epolls.contains(f))
            .map(|f| (f, watched(f)))
            .filter(|(_, w)| w.iter().any(|t| fresh_waker.contains(t)));
        let (fd, watches) = drivers.next()?;
        // Its duplicates watch the same descriptors; anything else makes the answer unsure.
        drivers.all(|(_, w)| w == watches).then_some(fd)
    });
    Some((rt, found))
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn build_and_find<R>(build: impl FnOnce() -> Option<R>) -> Option<(R, Option<i32>)> {
    Some((build()?, None))
}

/// Whether `fd` has events waiting (`poll(2)` without waiting). An error other than an
/// interruption counts as not ready: the caller must not go on to wait for it.
#[cfg(unix)]
pub fn ready(fd: i32) -> bool {
    loop {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, a timeout of zero.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        if n >= 0 {
            return n > 0 && p.revents & libc::POLLIN != 0;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return false;
        }
    }
}

#[cfg(not(unix))]
pub fn ready(_fd: i32) -> bool {
    false
}

#[cfg(test)]
mod tests {
    #[cfg(target_os = "linux")]
    #[test]
    fn finds_the_driver_of_a_current_thread_runtime() {
        let (rt, fd) = super::build_and_find(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()
        })
        .expect("built");
        let fd = fd.expect("the driver's epoll descriptor");
        // Nothing registered yet but the waker: not ready. A spawned task from another
        // thread wakes the driver: ready, until the runtime runs.
        assert!(!super::ready(fd));
        let handle = rt.handle().clone();
        std::thread::spawn(move || drop(handle.spawn(async {})))
            .join()
            .expect("joined");
        assert!(super::ready(fd));
        rt.block_on(tokio::task::yield_now());
        assert!(!super::ready(fd));
    }
}
