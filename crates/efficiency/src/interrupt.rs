//! Ctrl-C and SIGTERM during a series: noted, not fatal, so the running fio is stopped and
//! its files removed before the series ends (a series never leaves fio files behind).

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn note(_signal: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// From now on, SIGINT, SIGTERM and SIGHUP set [`interrupted`] instead of ending the
/// process.
pub fn catch() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}
