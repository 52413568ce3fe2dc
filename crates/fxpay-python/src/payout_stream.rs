//! `Client.pay_out_iter`'s engine: rows go in one at a time as `fxpay._payouts` reads them
//! from the table (a generator, a DataFrame's slices, a `LazyFrame`'s batches), each paid on
//! the shared runtime as a task of its own, and their outcomes come out as they end. The
//! Python side keeps at most `concurrency` rows in flight, so memory grows with
//! `concurrency`, never with the table.
use super::bridge::block;
use super::bridge::call;
use super::errors::Fallible;
use super::models::out::Out;
use super::observe::{observer, Waited};
use super::payout_rows::{record_from_py, refused};
use fxpay_core::{
    check_journal_key as check_key, pay_row, Client as Core, Error, JournalStore,
    PayoutOutcome as Outcome,
};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::{watch, Mutex};

/// One payout run's rows in and outcomes out.
#[pyclass(module = "fxpay._fxpay", frozen)]
pub struct PayoutStream {
    core: Core,
    journal: Arc<dyn JournalStore>,
    funding_source: String,
    done: UnboundedSender<(usize, Outcome)>,
    ended: Arc<Mutex<UnboundedReceiver<(usize, Outcome)>>>,
    /// Rows started and not ended yet (their outcome not sent).
    running: Arc<AtomicUsize>,
    /// Set by :meth:`abandon`: every row in flight is dropped where it is.
    abandon: watch::Sender<bool>,
}

impl PayoutStream {
    pub fn new(core: Core, journal: Arc<dyn JournalStore>, funding_source: String) -> Self {
        let (done, ended) = unbounded_channel();
        PayoutStream {
            core,
            journal,
            funding_source,
            done,
            ended: Arc::new(Mutex::new(ended)),
            running: Arc::new(AtomicUsize::new(0)),
            abandon: watch::Sender::new(false),
        }
    }

    /// The next outcome to end, as the bridge hands results to Python; with `within`, `None`
    /// when no row ends in that time (nothing is taken from the channel then).
    fn next_ended(
        &self,
        within: Option<Duration>,
    ) -> impl std::future::Future<Output = Result<Out, Error>> + Send + 'static {
        let ended = self.ended.clone();
        async move {
            let mut ended = ended.lock().await;
            let got = match within {
                None => ended.recv().await,
                Some(d) => match tokio::time::timeout(d, ended.recv()).await {
                    Ok(got) => got,
                    Err(_) => return Ok(Out::None),
                },
            };
            match got {
                Some((i, o)) => Ok(Out::Row(i, Box::new(o))),
                None => Ok(Out::None),
            }
        }
    }
}

#[pymethods]
impl PayoutStream {
    /// Checks row `index` (a mapping) as :meth:`push` reads it, sending nothing: a wrong type
    /// is a ``TypeError`` naming ``rows[index].field``, a missing or malformed key an
    /// ``InvalidRequestError``. (A wrong value is left for the row's own refusal.)
    fn check(&self, index: usize, record: Bound<'_, PyAny>) -> Fallible<()> {
        if let Ok(row) = record_from_py(record, index, &self.funding_source)? {
            check_key(&row.key).map_err(|_| {
                Error::invalid(format!(
                    "rows[{index}].key must be 1 to 255 characters, none of them a control character"
                ))
            })?;
        }
        Ok(())
    }

    /// Starts row `index` (a mapping). A wrong type is a ``TypeError`` naming
    /// ``rows[index].field`` (the row is not started); a wrong or missing value ends the row
    /// at once, refused. The row is paid on the runtime; its outcome comes from :meth:`next`.
    fn push(&self, py: Python<'_>, index: usize, record: Bound<'_, PyAny>) -> Fallible<()> {
        let row = match record_from_py(record, index, &self.funding_source)? {
            Ok(row) => match check_key(&row.key) {
                Ok(()) => row,
                Err(_) => {
                    let e = format!(
                        "rows[{index}].key must be 1 to 255 characters, none of them a control character"
                    );
                    let _ = self.done.send((index, refused(e)));
                    return Ok(());
                }
            },
            Err(e) => {
                let _ = self.done.send((index, refused(e)));
                return Ok(());
            }
        };
        let (c, journal, done) = (self.core.clone(), self.journal.clone(), self.done.clone());
        // The row's calls are traced under the caller's current span, as `pay_out`'s are.
        let obs = observer(py, Waited::Blocking);
        let running = self.running.clone();
        running.fetch_add(1, Ordering::AcqRel);
        let mut abandoned = self.abandon.subscribe();
        fxpay_core::runtime().spawn(async move {
            tokio::select! {
                o = pay_row(&c, &journal, row, obs.as_deref()) => {
                    let _ = done.send((index, o));
                }
                // Dropped mid-call: its key stays `pending` until its lease lapses (`unknown`).
                // The stream itself going away (a `pay_out_iter` left early) abandons nothing:
                // the row ends, and exit waits for it.
                _ = async {
                    if abandoned.wait_for(|a| *a).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                } => {}
            }
            running.fetch_sub(1, Ordering::AcqRel);
        });
        Ok(())
    }

    /// How many rows started have not ended yet. After a Ctrl-C, the payout waits until none
    /// runs: an outcome taken from :meth:`next` just as the interrupt came may never reach
    /// the caller, but its row has ended all the same.
    fn running(&self) -> usize {
        self.running.load(Ordering::Acquire)
    }

    /// Drops every row in flight where it is (a second Ctrl-C): no outcome comes for them,
    /// and their keys stay `pending` in the journal until their leases lapse, then read
    /// `unknown`. Rows pushed afterwards are dropped at once.
    fn abandon(&self) {
        self.abandon.send_replace(true);
    }

    /// The next row to end: ``(index, outcome)``; waits with the GIL released (Ctrl-C
    /// raises ``KeyboardInterrupt``; rows in flight still end, in the journal). With
    /// ``within`` (seconds), ``None`` when no row ends in that time.
    #[pyo3(signature = (within = None))]
    fn next(&self, py: Python<'_>, within: Option<f64>) -> PyResult<Py<PyAny>> {
        block(py, self.next_ended(within.map(wait_of)))
    }

    /// :meth:`next`, awaitable.
    #[pyo3(signature = (within = None))]
    fn next_async(&self, py: Python<'_>, within: Option<f64>) -> PyResult<Py<PyAny>> {
        let fut = self.next_ended(within.map(wait_of));
        call(py, "pay_out_iter_async", move |_| Box::pin(fut))
    }
}

/// A wait of `seconds` (a day at most; nothing for a value that is no wait).
fn wait_of(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds.clamp(0.0, 86_400.0)).unwrap_or(Duration::ZERO)
}
