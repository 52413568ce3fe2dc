//! The sandbox's faults: `fail_next`, `drop_next` and `delay_next` arm one for a path, and
//! `unfired_faults` tells the ones that have not fired.
use super::CoreSandbox;
use crate::convert::{int, text};
use crate::errors::{Failure, Fallible};
use fxpay_core::Error;
use pyo3::prelude::*;

#[pymethods]
impl CoreSandbox {
    /// The faults that have not fired, as the calls that added them.
    fn unfired_faults(&self) -> PyResult<Vec<String>> {
        Ok(self.served()?.unfired_faults())
    }

    #[pyo3(signature = (path, status, times = None, retry_after = None))]
    #[pyo3(text_signature = "(self, path, status, times=1, retry_after=None)")]
    fn fail_next(
        &self,
        path: &Bound<'_, PyAny>,
        status: &Bound<'_, PyAny>,
        times: Option<&Bound<'_, PyAny>>,
        retry_after: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let path = text(path, "path")?;
        let status = int(status, "status", Error::InvalidRequest)?;
        let status = u16::try_from(status)
            .ok()
            .filter(|s| (100..=599).contains(s))
            .ok_or_else(|| {
                Failure::from(Error::invalid(format!(
                    "status must be an HTTP status, got {status}"
                )))
            })?;
        let times = match times {
            Some(t) if !t.is_none() => int(t, "times", Error::InvalidRequest)?,
            _ => 1,
        };
        let times = u32::try_from(times).map_err(|_| {
            Failure::from(Error::invalid(format!(
                "times must be between 0 and 4294967295, got {times}"
            )))
        })?;
        let retry_after = match retry_after {
            Some(r) if !r.is_none() => {
                let r = int(r, "retry_after", Error::InvalidRequest)?;
                Some(u64::try_from(r).map_err(|_| {
                    Failure::from(Error::invalid(format!(
                        "retry_after must be a number of seconds >= 0, got {r}"
                    )))
                })?)
            }
            _ => None,
        };
        self.served()?.fail_next(&path, status, times, retry_after);
        Ok(())
    }

    fn drop_next(&self, path: &Bound<'_, PyAny>, after_processing: bool) -> PyResult<()> {
        self.served()?
            .drop_next(&text(path, "path")?, after_processing);
        Ok(())
    }

    fn delay_next(&self, path: &Bound<'_, PyAny>, seconds: f64) -> Fallible<()> {
        let path = text(path, "path")?;
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Err(Failure::from(Error::invalid(
                "seconds must be a finite number >= 0",
            )));
        }
        self.served()?.delay_next(&path, seconds);
        Ok(())
    }
}
