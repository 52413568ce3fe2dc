//! Injected faults: fail, drop or delay the next matching requests.
//!
//! A rule matches a request path exactly (`/v1/payments/quotes`), or by prefix when it ends
//! with `*` (`/v1/payments/quotes/*`), optionally limited to a method
//! (`POST /v1/payments/deals`). Rules fire in the order they were added; each firing uses
//! up one of the rule's `times`.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use axum::http::Method;

/// What a fired rule does to the request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Action {
    /// Answer `status` with an `errors` body without processing.
    Fail {
        status: u16,
        retry_after: Option<u64>,
    },
    /// Close the connection with no response, before or after processing.
    Drop { after_processing: bool },
    /// Sleep this many real seconds, then process normally.
    Delay { seconds: f64 },
}

#[derive(Debug)]
struct Rule {
    method: Option<Method>,
    path: String,
    prefix: bool,
    action: Action,
    remaining: u32,
}

impl Rule {
    fn matches(&self, method: &Method, path: &str) -> bool {
        if self.method.as_ref().is_some_and(|m| m != method) {
            return false;
        }
        if self.prefix {
            path.starts_with(&self.path)
        } else {
            path == self.path
        }
    }
}

/// The registered rules.
#[derive(Debug, Default)]
pub struct Faults {
    /// Number of rules with uses left: lets the hot path skip the lock.
    active: AtomicUsize,
    rules: Mutex<Vec<Rule>>,
    fired: AtomicUsize,
}

impl Faults {
    /// Adds a rule for `spec` (`[METHOD ]PATH[*]`) that fires `times` times.
    pub fn add(&self, spec: &str, action: Action, times: u32) {
        if times == 0 {
            return;
        }
        let spec = spec.trim();
        let (method, path) = match spec.split_once(char::is_whitespace) {
            Some((m, p)) => (
                Method::from_bytes(m.to_ascii_uppercase().as_bytes()).ok(),
                p.trim(),
            ),
            None => (None, spec),
        };
        let (path, prefix) = match path.strip_suffix('*') {
            Some(p) => (p.to_owned(), true),
            None => (path.to_owned(), false),
        };
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        rules.push(Rule {
            method,
            path,
            prefix,
            action,
            remaining: times,
        });
        self.active.store(rules.len(), Ordering::Release);
    }

    /// Takes one use of the first rule matching the request, if any.
    pub fn take(&self, method: &Method, path: &str) -> Option<Action> {
        if self.active.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        let idx = rules.iter().position(|r| r.matches(method, path))?;
        let rule = rules.get_mut(idx)?;
        let action = rule.action;
        rule.remaining = rule.remaining.saturating_sub(1);
        if rule.remaining == 0 {
            rules.remove(idx);
        }
        self.active.store(rules.len(), Ordering::Release);
        self.fired.fetch_add(1, Ordering::Relaxed);
        Some(action)
    }

    /// Removes every rule and zeroes the fired count.
    pub fn clear(&self) {
        let mut rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        rules.clear();
        self.active.store(0, Ordering::Release);
        self.fired.store(0, Ordering::Relaxed);
    }

    /// How many faults have fired so far.
    pub fn fired(&self) -> usize {
        self.fired.load(Ordering::Relaxed)
    }

    /// How many rules still have uses left.
    pub fn pending(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }

    /// The rules with uses left, each as the call that added it would be written
    /// (`fail_next('POST /v1/payments/deals', 503), 2 of 2 left`), in the order they were added.
    pub fn unfired(&self) -> Vec<String> {
        let rules = self.rules.lock().unwrap_or_else(|e| e.into_inner());
        rules.iter().map(Rule::describe).collect()
    }
}

impl Rule {
    fn describe(&self) -> String {
        let spec = format!(
            "{}{}{}",
            self.method
                .as_ref()
                .map(|m| format!("{m} "))
                .unwrap_or_default(),
            self.path,
            if self.prefix { "*" } else { "" }
        );
        let call = match self.action {
            Action::Fail {
                status,
                retry_after: None,
            } => format!("fail_next({spec:?}, {status})"),
            Action::Fail {
                status,
                retry_after: Some(r),
            } => format!("fail_next({spec:?}, {status}, retry_after={r})"),
            Action::Drop { after_processing } => format!(
                "drop_next({spec:?}, after_processing={})",
                if after_processing { "True" } else { "False" }
            ),
            Action::Delay { seconds } => format!("delay_next({spec:?}, {seconds})"),
        };
        format!("{call}: {} use(s) left", self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_prefix_and_method() {
        let f = Faults::default();
        f.add(
            "POST /v1/payments/deals",
            Action::Drop {
                after_processing: true,
            },
            1,
        );
        f.add("/v1/payments/quotes/*", Action::Delay { seconds: 0.1 }, 2);
        assert_eq!(f.take(&Method::GET, "/v1/payments/deals"), None);
        assert_eq!(
            f.take(&Method::POST, "/v1/payments/deals"),
            Some(Action::Drop {
                after_processing: true
            })
        );
        assert_eq!(f.take(&Method::POST, "/v1/payments/deals"), None);
        assert_eq!(f.take(&Method::POST, "/v1/payments/quotes"), None);
        assert!(f.take(&Method::GET, "/v1/payments/quotes/abc").is_some());
        assert!(f.take(&Method::GET, "/v1/payments/quotes/abc").is_some());
        assert_eq!(f.take(&Method::GET, "/v1/payments/quotes/abc"), None);
        assert_eq!(f.fired(), 3);
        assert_eq!(f.pending(), 0);
        assert!(f.unfired().is_empty());
        f.add(
            "post /v1/payments/deals",
            Action::Fail {
                status: 503,
                retry_after: Some(1),
            },
            2,
        );
        f.add("/v1/x/*", Action::Delay { seconds: 0.5 }, 1);
        assert_eq!(
            f.unfired(),
            [
                "fail_next(\"POST /v1/payments/deals\", 503, retry_after=1): 2 use(s) left",
                "delay_next(\"/v1/x/*\", 0.5): 1 use(s) left",
            ]
        );
        assert_eq!(f.pending(), 2);
    }
}
