//! libpangolin, Pangolin's C ABI (`include/pangolin.h`): libpmemobj's transaction calls as
//! `pgl_*` functions over a persim-pangolin pool in a mapped file, which threads share. A
//! thread has at most one transaction, kept per thread as libpmemobj keeps its own.
//!
//! Errors return NULL, 0 or -1 and leave a message for `pgl_errormsg`.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fs::{File, OpenOptions};
use std::ptr;

use persim_ringbuf::{dispatch, AccessKind, AccessVisitor, MappedRegion, PmAccess, Strategy};

use persim_pangolin::{unit_bit, Geometry, Pool, TxState};

/// The PM access chosen at run time: `PGL_ACCESS` names one (`clwb`, `nt-avx2`, `eadr`...),
/// else the cheapest flush this CPU has.
pub struct AnyAccess(Box<dyn PmAccess>);

impl PmAccess for AnyAccess {
    unsafe fn store(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: forwarded from our caller.
        unsafe { self.0.store(base, offset, src) }
    }

    unsafe fn store_part(&self, base: *mut u8, offset: usize, src: &[u8]) {
        // SAFETY: forwarded from our caller.
        unsafe { self.0.store_part(base, offset, src) }
    }

    unsafe fn xor_part(&self, base: *mut u8, offset: usize, mask: &[u8]) {
        // SAFETY: forwarded from our caller.
        unsafe { self.0.xor_part(base, offset, mask) }
    }

    fn fence(&self) {
        self.0.fence();
    }
}

struct Boxed;

impl AccessVisitor for Boxed {
    type Output = Box<dyn PmAccess>;
    fn visit<A: PmAccess + 'static>(self, access: A) -> Box<dyn PmAccess> {
        Box::new(access)
    }
}

fn access() -> Result<AnyAccess, String> {
    let kind = match std::env::var("PGL_ACCESS") {
        Ok(name) => name.parse().map_err(|_| {
            format!(
                "PGL_ACCESS={name} is no access kind; use one of {:?}",
                AccessKind::ALL.map(AccessKind::name)
            )
        })?,
        Err(_) => AccessKind::detect(Strategy::Flush).unwrap_or(AccessKind::Eadr),
    };
    dispatch(kind, Boxed)
        .map(AnyAccess)
        .map_err(|e| e.to_string())
}

/// An open pool (`PGLpool` in C), shared by the threads that use it: each thread's
/// transaction is its own (`TX`).
pub struct PglPool {
    pool: Pool<MappedRegion, AnyAccess>,
}

/// Where the thread's transaction is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    None,
    Open,
    Committed,
    Aborted,
}

/// A thread's transaction: its pool, phase and state, whose memory stays for the next
/// one (no state moves in or out per transaction).
struct Thread {
    pool: *mut PglPool,
    phase: Phase,
    state: TxState,
}

thread_local! {
    /// The thread's transaction and its pool.
    static TX: RefCell<Thread> = const {
        RefCell::new(Thread {
            pool: ptr::null_mut(),
            phase: Phase::None,
            state: TxState::new(),
        })
    };
    static ERROR: RefCell<CString> = RefCell::new(CString::default());
    /// A copy of the open transaction's `TxState::buffered` (stale bits are harmless):
    /// `pgl_get` of an object whose bit is clear reads PM without reaching `TX`.
    static BUFFERED: Cell<u64> = const { Cell::new(0) };
}

fn fail<T>(message: impl ToString, value: T) -> T {
    let message = CString::new(message.to_string().replace('\0', " ")).unwrap_or_default();
    ERROR.with(|e| *e.borrow_mut() = message);
    value
}

/// The last error of this thread, for people.
#[unsafe(no_mangle)]
pub extern "C" fn pgl_errormsg() -> *const c_char {
    ERROR.with(|e| e.borrow().as_ptr())
}

/// # Safety
/// `path` is a NUL-terminated string.
unsafe fn map(path: *const c_char, create: Option<u64>) -> Result<MappedRegion, String> {
    // SAFETY: the caller passes a C string.
    let path = unsafe { CStr::from_ptr(path) }
        .to_string_lossy()
        .into_owned();
    let file: File = match create {
        Some(len) => {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path);
            let file =
                file.map_err(|e| format!("cannot create {path}: {e} (it must not exist)"))?;
            file.set_len(len)
                .map_err(|e| format!("cannot size {path}: {e}"))?;
            file
        }
        None => OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open {path}: {e}"))?,
    };
    // SAFETY: the pool owns the mapping; nothing else may write the file meanwhile.
    unsafe { MappedRegion::map(&file) }.map_err(|e| format!("cannot map {path}: {e}"))
}

/// Creates a pool of `size` bytes at `path` (a new file) with a root object of `root_size`
/// bytes.
///
/// # Safety
/// `path` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pgl_create_pool(
    path: *const c_char,
    size: u64,
    root_size: u64,
) -> *mut PglPool {
    // SAFETY: forwarded from the caller.
    unsafe { create(path, Geometry::new(size), root_size) }
}

/// `pgl_create_pool` with the zones' shape: chunk rows of `chunk_size` bytes, `rows` a zone
/// (the last one parity), one log lane of two copies of `log_size` bytes (threads commit
/// in turn; `pgl_create_pool` has 4 lanes).
///
/// # Safety
/// `path` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pgl_create_pool_geometry(
    path: *const c_char,
    size: u64,
    chunk_size: u64,
    rows: u64,
    log_size: u64,
    root_size: u64,
) -> *mut PglPool {
    let geometry = Geometry {
        pool_len: size,
        chunk_size,
        rows,
        log_size,
        // One lane (a lane is two log copies): a pool of maps for one thread.
        lanes: 1,
    };
    // SAFETY: forwarded from the caller.
    unsafe { create(path, geometry, root_size) }
}

/// # Safety
/// `path` is a NUL-terminated string.
unsafe fn create(path: *const c_char, geometry: Geometry, root_size: u64) -> *mut PglPool {
    // SAFETY: forwarded from the caller.
    let pool = unsafe { map(path, Some(geometry.pool_len)) }.and_then(|region| {
        Pool::format(region, access()?, geometry, root_size).map_err(|e| e.to_string())
    });
    match pool {
        Ok(pool) => Box::into_raw(Box::new(PglPool { pool })),
        Err(e) => fail(e, ptr::null_mut()),
    }
}

/// Opens the pool at `path`, completing a transaction a crash interrupted.
///
/// # Safety
/// `path` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pgl_open_pool(path: *const c_char) -> *mut PglPool {
    // SAFETY: forwarded from the caller.
    let pool = unsafe { map(path, None) }
        .and_then(|region| Pool::open(region, access()?).map_err(|e| e.to_string()));
    match pool {
        Ok(pool) => Box::into_raw(Box::new(PglPool { pool })),
        Err(e) => fail(e, ptr::null_mut()),
    }
}

/// # Safety
/// `pool` came from `pgl_create_pool`/`pgl_open_pool` and no thread uses it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pgl_close_pool(pool: *mut PglPool) {
    if !pool.is_null() {
        // SAFETY: made by Box::into_raw in this module.
        drop(unsafe { Box::from_raw(pool) });
    }
}

/// # Safety
/// `pool` is an open pool.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pgl_root(pool: *mut PglPool) -> u64 {
    // SAFETY: the caller passes an open pool.
    unsafe { &*pool }.pool.root()
}

/// Verifies every object and parity page, repairing what it can; returns the number of
/// objects lost (0: the pool is whole), or -1.
///
/// # Safety
/// `pool` is an open pool that no other thread uses meanwhile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pgl_scrub(pool: *mut PglPool) -> c_int {
    // SAFETY: the caller passes an open pool.
    let report = unsafe { &mut *pool }.pool.scrub();
    report.lost.len() as c_int
}

/// Repairs since the pool was opened (objects rebuilt from parity, metadata copies and
/// parity pages rewritten), those of opening it included.
///
/// # Safety
/// `pool` is an open pool.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pgl_repairs(pool: *mut PglPool) -> u64 {
    // SAFETY: the caller passes an open pool.
    unsafe { &*pool }.pool.repairs()
}

/// The first allocated object in pool order (the root among them), or 0.
///
/// # Safety
/// `pool` is an open pool.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pgl_first(pool: *mut PglPool) -> u64 {
    // SAFETY: the caller passes an open pool.
    unsafe { pgl_next(pool, 0) }
}

/// The allocated object after `oid` in pool order, or 0.
///
/// # Safety
/// `pool` is an open pool.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pgl_next(pool: *mut PglPool, oid: u64) -> u64 {
    // SAFETY: the caller passes an open pool.
    let objects = unsafe { &*pool }.pool.objects();
    let next = objects.partition_point(|&o| o <= oid);
    objects.get(next).copied().unwrap_or(0)
}

/// The type number `oid` was allocated with, or -1.
///
/// # Safety
/// `pool` is an open pool.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pgl_type_num(pool: *mut PglPool, oid: u64) -> i64 {
    // SAFETY: the caller passes an open pool.
    match unsafe { &*pool }.pool.type_num(oid) {
        Ok(type_num) => i64::from(type_num),
        Err(e) => fail(e, -1),
    }
}

/// Begins this thread's transaction on `pool`.
///
/// # Safety
/// `pool` is an open pool.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pgl_tx_begin(pool: *mut PglPool) -> c_int {
    TX.with(|tx| {
        let mut tx = tx.borrow_mut();
        if tx.phase != Phase::None {
            return fail(
                "a transaction is open on this thread; end it with pgl_tx_end first",
                -1,
            );
        }
        BUFFERED.set(tx.state.buffered());
        (tx.pool, tx.phase) = (pool, Phase::Open);
        0
    })
}

/// Runs `f` on the thread's open transaction, or fails with `none`.
fn with_tx<T>(
    none: T,
    f: impl FnOnce(&Pool<MappedRegion, AnyAccess>, &mut TxState) -> Result<T, String>,
) -> T {
    TX.with(|tx| match &mut *tx.borrow_mut() {
        Thread {
            pool,
            phase: Phase::Open,
            state,
        } => {
            // SAFETY: pgl_tx_begin's caller passed an open pool, open until pgl_tx_end;
            // threads share it (`&`).
            let pool = unsafe { &**pool };
            let out = f(&pool.pool, state).unwrap_or_else(|e| fail(e, none));
            BUFFERED.set(state.buffered());
            out
        }
        _ => fail(
            "no transaction is open on this thread; call pgl_tx_begin first",
            none,
        ),
    })
}

/// Allocates a zeroed object; returns its id, or 0.
#[unsafe(no_mangle)]
pub extern "C" fn pgl_tx_alloc(size: u64, type_num: u32) -> u64 {
    with_tx(0, |pool, state| {
        pool.tx_alloc(state, size, type_num)
            .map_err(|e| e.to_string())
    })
}

/// Frees `oid` when the transaction commits.
#[unsafe(no_mangle)]
pub extern "C" fn pgl_tx_free(oid: u64) -> c_int {
    with_tx(-1, |pool, state| {
        pool.tx_free(state, oid)
            .map(|()| 0)
            .map_err(|e| e.to_string())
    })
}

/// The micro-buffer of `oid` (its data, verified first), all of it to be written back.
#[unsafe(no_mangle)]
pub extern "C" fn pgl_tx_open(oid: u64) -> *mut c_void {
    with_tx(ptr::null_mut(), |pool, state| {
        Ok(pool
            .tx_open(state, oid)
            .map_err(|e| e.to_string())?
            .data_ptr()
            .cast())
    })
}

/// The micro-buffer of `oid` (its data), bytes `offset..offset + len` to be written back.
#[unsafe(no_mangle)]
pub extern "C" fn pgl_tx_add_range(oid: u64, offset: u64, len: u64) -> *mut c_void {
    with_tx(ptr::null_mut(), |pool, state| {
        let buffer = pool
            .tx_add_range(state, oid, offset, len)
            .map_err(|e| e.to_string())?;
        Ok(buffer.data_ptr().cast())
    })
}

/// The data of `oid`: this thread's micro-buffer if the transaction opened it, else the
/// object on PM, read directly without verification.
///
/// # Safety
/// `pool` is an open pool.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pgl_get(pool: *mut PglPool, oid: u64) -> *const c_void {
    // Most calls read an object the transaction has no buffer of: answered here, the
    // rest (and errors) out of line, so that this path sets up no frame for them.
    if BUFFERED.get() & unit_bit(oid) == 0 {
        // SAFETY: the caller passes an open pool.
        if let Ok(data) = unsafe { &*pool }.pool.direct(oid) {
            return data.cast();
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe { get_buffered(pool, oid) }
}

/// `pgl_get` of an object the transaction may hold a buffer of, or of no object.
///
/// # Safety
/// `pool` is an open pool.
#[inline(never)]
unsafe fn get_buffered(pool: *mut PglPool, oid: u64) -> *const c_void {
    let buffered = TX.with(|tx| match &mut *tx.borrow_mut() {
        Thread {
            pool: p,
            phase: Phase::Open,
            state,
        } if *p == pool => state.buffer(oid).map(|b| b.data_ptr().cast_const()),
        _ => None,
    });
    if let Some(data) = buffered {
        return data.cast();
    }
    // SAFETY: the caller passes an open pool.
    match unsafe { &*pool }.pool.direct(oid) {
        Ok(data) => data.cast(),
        Err(e) => fail(e, ptr::null()),
    }
}

/// Commits the thread's transaction: durable when this returns 0; on -1 it was aborted.
#[unsafe(no_mangle)]
pub extern "C" fn pgl_tx_commit() -> c_int {
    TX.with(|tx| match &mut *tx.borrow_mut() {
        Thread {
            pool,
            phase: phase @ Phase::Open,
            state,
        } => {
            // SAFETY: as in `with_tx`.
            let pool = unsafe { &**pool };
            match pool.pool.tx_commit(state) {
                Ok(()) => {
                    *phase = Phase::Committed;
                    0
                }
                Err(e) => {
                    *phase = Phase::Aborted;
                    fail(e, -1)
                }
            }
        }
        _ => fail(
            "no transaction is open on this thread; call pgl_tx_begin first",
            -1,
        ),
    })
}

/// Ends the thread's transaction, aborting it if it was not committed; returns 0 if it
/// committed, -1 if not.
#[unsafe(no_mangle)]
pub extern "C" fn pgl_tx_end() -> c_int {
    TX.with(|tx| {
        let mut tx = tx.borrow_mut();
        let phase = std::mem::replace(&mut tx.phase, Phase::None);
        match phase {
            Phase::Committed => 0,
            Phase::Open | Phase::Aborted => {
                if phase == Phase::Open {
                    // SAFETY: as in `with_tx`.
                    let pool = unsafe { &*tx.pool };
                    pool.pool.tx_abort(&mut tx.state);
                }
                fail("the transaction was not committed; it was aborted", -1)
            }
            Phase::None => fail("no transaction is open on this thread", -1),
        }
    })
}

/// Opens `oid` alone for an atomic update (a transaction of its own); returns its
/// micro-buffer. `pgl_commit` commits it.
///
/// # Safety
/// `pool` is an open pool.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pgl_open(pool: *mut PglPool, oid: u64) -> *mut c_void {
    // SAFETY: forwarded from the caller.
    if unsafe { pgl_tx_begin(pool) } != 0 {
        return ptr::null_mut();
    }
    let data = pgl_tx_open(oid);
    if data.is_null() {
        let message = ERROR.with(|e| e.borrow().clone());
        pgl_tx_end();
        return fail(message.to_string_lossy(), ptr::null_mut());
    }
    data
}

/// Commits and ends the update `pgl_open` began.
#[unsafe(no_mangle)]
pub extern "C" fn pgl_commit() -> c_int {
    let committed = pgl_tx_commit();
    TX.with(|tx| tx.borrow_mut().phase = Phase::None);
    committed
}
