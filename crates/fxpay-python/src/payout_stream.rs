//! `Client.pay_out_iter`'s engine: rows go in one at a time as `fxpay._payouts` reads them
//! from the table (a generator, a DataFrame's slices, a `LazyFrame`'s batches), each paid on
//! the shared runtime as a task of its own, and their outcomes come out as they end. The
//! Python side keeps at most `concurrency` rows in flight, so memory grows with
//! `concurrency`, never with the table.
use super::bridge::block;
use super::bridge::call;
use super::errors::Fallible;
use super::models::Out;
use super::observe::observer;
use super::payout_rows::{record_from_py, refused};
use fxpay_core::{
    check_journal_key as check_key, pay_row, Client as Core, Error, PayoutOutcome as Outcome, Store,
};
use pyo3::prelude::*;
use std::sync::Arc;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::Mutex;

/// One payout run's rows in and outcomes out.
#[pyclass(module = "fxpay._fxpay", frozen)]
pub struct PayoutStream {
    core: Core,
    journal: Arc<dyn Store>,
    funding_source: String,
    done: UnboundedSender<(usize, Outcome)>,
    ended: Arc<Mutex<UnboundedReceiver<(usize, Outcome)>>>,
}

impl PayoutStream {
    pub fn new(core: Core, journal: Arc<dyn Store>, funding_source: String) -> Self {
        let (done, ended) = unbounded_channel();
        PayoutStream {
            core,
            journal,
            funding_source,
            done,
            ended: Arc::new(Mutex::new(ended)),
        }
    }

    /// The next outcome to end, as the bridge hands results to Python.
    fn next_ended(&self) -> impl std::future::Future<Output = Result<Out, Error>> + Send + 'static {
        let ended = self.ended.clone();
        async move {
            match ended.lock().await.recv().await {
                Some((i, o)) => Ok(Out::Row(i, Box::new(o))),
                None => Ok(Out::None),
            }
        }
    }
}

#[pymethods]
impl PayoutStream {
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
        let obs = observer(py);
        fxpay_core::runtime().spawn(async move {
            let o = pay_row(&c, &journal, row, obs.as_deref()).await;
            let _ = done.send((index, o));
        });
        Ok(())
    }

    /// The next row to end: ``(index, outcome)``; waits with the GIL released (Ctrl-C
    /// raises ``KeyboardInterrupt``; rows in flight still end, in the journal).
    fn next(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        block(py, self.next_ended())
    }

    /// :meth:`next`, awaitable.
    fn next_async(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let fut = self.next_ended();
        call(py, "pay_out_iter_async", move |_| Box::pin(fut))
    }
}
