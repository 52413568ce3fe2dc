//! The exit gate's protocol (`fxpay_core::Gate`) under loom: in every interleaving, no thread
//! is inside once the closer has seen the gate empty (for the binding: no foreign thread
//! takes the GIL once the interpreter may finalize). `just loom` runs it; without the
//! feature this file is not built.
use fxpay_core::Gate;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

/// A thread tries to enter while the closer (the `atexit` hook) closes the gate, waits
/// until it is empty, and "finalizes". If the thread gets in, it must never see finalization.
/// (One thread is enough for the race, and keeps the model small: two took 3 minutes.)
#[test]
fn nobody_is_inside_once_the_closer_has_seen_the_gate_empty() {
    loom::model(|| {
        let gate = Arc::new(Gate::default());
        let finalized = Arc::new(AtomicBool::new(false));
        let user = {
            let (gate, finalized) = (gate.clone(), finalized.clone());
            thread::spawn(move || {
                if let Some(_inside) = gate.enter() {
                    assert!(
                        !finalized.load(Ordering::SeqCst),
                        "a thread is inside the gate after the closer moved on"
                    );
                }
            })
        };
        gate.close();
        while !gate.is_empty() {
            thread::yield_now();
        }
        finalized.store(true, Ordering::SeqCst);
        user.join().expect("the user thread panicked");
    });
}
