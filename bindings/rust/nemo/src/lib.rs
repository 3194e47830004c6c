//! Safe Rust API for nemo: fast event notification between threads.
//!
//! * [`Domain`]: a set of places and the actions they can run.  `Send` and
//!   `Sync`: share it with `Arc` or `std::thread::scope`.  Dropped, it is
//!   destroyed (after every [`Place`] borrowed from it has left).
//! * [`Place`]: the calling thread joined to a domain.  nemo binds a place
//!   to the thread that joined: every send, poll and wait acts for the
//!   calling thread's place.  So a `Place` is neither `Send` nor `Sync`;
//!   it leaves when dropped, on its own thread:
//!
//! ```compile_fail
//! fn needs_send<T: Send>(_: T) {}
//! let d = nemo::Domain::new().unwrap();
//! needs_send(d.join().unwrap()); // error: `*const ()` cannot be sent between threads
//! ```
//!
//! * Actions: closures registered on the domain ([`Domain::register`]),
//!   run on the receiving place's thread with a [`Msg`].
//! * Notifications: a per-place closure ([`Place::set_notify_handler`]).
//! * Errors: [`Error`], the errno nemo returned and `nemo_last_error()`'s text.
//!
//! Handlers run inside nemo calls of their place (poll, wait, a send that
//! waits for room, leave).  A panic in a handler cannot unwind through C:
//! it aborts the process.
//!
//! With the `tokio` feature, [`Place::async_fd`] and [`Place::ready`] serve
//! a place from a tokio reactor; the future must be polled on the place's
//! thread (a current-thread runtime or a `LocalSet`), which the types
//! enforce: a `Place` cannot cross threads.
use nemo_sys as sys;
use std::ffi::CStr;
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_uint, c_void};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use sys::errno;

// ----------------------------------------------------------------- errors

/// What kind of failure an [`Error`] is (from its errno).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// ETIMEDOUT: a deadline passed.
    Timeout,
    /// EAGAIN: a full queue under [`Flags::NONBLOCK`].
    WouldBlock,
    /// ESRCH: no such place (never joined, or left).
    NoPlace,
    /// ENOTCONN: the calling thread is not a place.
    NotAPlace,
    /// EALREADY: the calling thread is already a place.
    AlreadyAPlace,
    /// ENOENT: an action without handler, or a place without notification handler.
    NoHandler,
    /// EEXIST: an action registered twice.
    AlreadyRegistered,
    /// ERANGE: an id out of range.
    OutOfRange,
    /// EMSGSIZE: a payload over [`PAYLOAD_MAX`].
    TooLarge,
    /// EINVAL: a malformed argument.
    InvalidArgument,
    /// ENOSPC: the domain has no free place.
    DomainFull,
    /// EBUSY
    Busy,
    /// ENOBUFS: a handler's overflow is full.
    NoBuffers,
    /// Anything else.
    Other,
}

/// A failed nemo call: the errno it returned and, in words, why
/// (`nemo_last_error()`, or `nemo_strerror()` where nemo leaves no text:
/// timeouts and EAGAIN are outcomes, not failures, for nemo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The errno value.
    pub code: i32,
    /// What went wrong, e.g. "nemo_am_sendv: action 7 has no handler in this domain (ENOENT)".
    pub message: String,
}

fn cstr(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl Error {
    /// The error of a nemo call that just returned `code` on this thread.
    pub fn from_code(code: i32) -> Error {
        let outcome = code == errno::ETIMEDOUT || code == errno::EAGAIN;
        let mut message = if outcome { String::new() } else { cstr(unsafe { sys::nemo_last_error() }) };
        if message.is_empty() {
            message = cstr(unsafe { sys::nemo_strerror(code) });
        }
        Error { code, message }
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        use errno::*;
        match self.code {
            ETIMEDOUT => ErrorKind::Timeout,
            EAGAIN => ErrorKind::WouldBlock,
            ESRCH => ErrorKind::NoPlace,
            ENOTCONN => ErrorKind::NotAPlace,
            EALREADY => ErrorKind::AlreadyAPlace,
            ENOENT => ErrorKind::NoHandler,
            EEXIST => ErrorKind::AlreadyRegistered,
            ERANGE => ErrorKind::OutOfRange,
            EMSGSIZE => ErrorKind::TooLarge,
            EINVAL => ErrorKind::InvalidArgument,
            ENOSPC => ErrorKind::DomainFull,
            EBUSY => ErrorKind::Busy,
            ENOBUFS => ErrorKind::NoBuffers,
            _ => ErrorKind::Other,
        }
    }

    /// A deadline passed (ETIMEDOUT).
    pub fn is_timeout(&self) -> bool {
        self.kind() == ErrorKind::Timeout
    }

    /// A full queue under NONBLOCK (EAGAIN).
    pub fn is_would_block(&self) -> bool {
        self.kind() == ErrorKind::WouldBlock
    }

    /// No such place (ESRCH).
    pub fn is_no_place(&self) -> bool {
        self.kind() == ErrorKind::NoPlace
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            write!(f, "nemo error {}", self.code)
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        let kind = std::io::Error::from_raw_os_error(e.code).kind();
        std::io::Error::new(kind, e)
    }
}

/// `Result` with a nemo [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

fn check(rc: i32) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::from_code(rc))
    }
}

// ----------------------------------------------------------------- ids, flags, deadlines

/// A place's name: index (low 16 bits) and generation.  Ids of places that
/// left never reach a later occupant of the same index (sends fail with
/// [`ErrorKind::NoPlace`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PlaceId(pub u64);

impl PlaceId {
    /// No place.
    pub const NONE: PlaceId = PlaceId(sys::NEMO_PLACE_NONE);

    /// The index of the place in its domain.
    pub fn index(self) -> u32 {
        sys::nemo_place_index(self.0)
    }

    /// The calling thread's place, or `None`.
    pub fn current() -> Option<PlaceId> {
        let id = unsafe { sys::nemo_place_self() };
        if id == sys::NEMO_PLACE_NONE {
            None
        } else {
            Some(PlaceId(id))
        }
    }
}

impl fmt::Display for PlaceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "place {}#{}", self.index(), self.0 >> 16)
    }
}

/// Send flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags(pub u32);

impl Flags {
    /// No flag: a send that finds its queue full waits for room.
    pub const NONE: Flags = Flags(0);
    /// Kick the receiver even if its queue was already non-empty.
    pub const PUSH: Flags = Flags(sys::NEMO_PUSH);
    /// A full queue fails with [`ErrorKind::WouldBlock`] instead of waiting.
    pub const NONBLOCK: Flags = Flags(sys::NEMO_NONBLOCK);
    /// More sends follow: leave the wake-up to the next send without MORE.
    pub const MORE: Flags = Flags(sys::NEMO_MORE);
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, o: Flags) -> Flags {
        Flags(self.0 | o.0)
    }
}

/// The largest inline payload of one message, in bytes.
pub const PAYLOAD_MAX: usize = sys::NEMO_AM_PAYLOAD_MAX as usize;

/// A deadline: a point in time or a time from now.  Converted to the
/// CLOCK_MONOTONIC `timespec` nemo takes.
#[derive(Debug, Clone, Copy)]
pub enum Deadline {
    /// At this instant.
    At(Instant),
    /// This long from the call.
    After(Duration),
}

impl From<Instant> for Deadline {
    fn from(i: Instant) -> Deadline {
        Deadline::At(i)
    }
}

impl From<Duration> for Deadline {
    fn from(d: Duration) -> Deadline {
        Deadline::After(d)
    }
}

fn monotonic_now() -> sys::timespec {
    let mut ts = sys::timespec::default();
    unsafe { sys::clock_gettime(sys::CLOCK_MONOTONIC, &mut ts) };
    ts
}

fn add(ts: sys::timespec, d: Duration) -> sys::timespec {
    let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 2).min(i64::MAX / 2);
    let mut sec = ts.tv_sec.saturating_add(secs);
    let mut nsec = ts.tv_nsec as i64 + i64::from(d.subsec_nanos());
    if nsec >= 1_000_000_000 {
        nsec -= 1_000_000_000;
        sec = sec.saturating_add(1);
    }
    sys::timespec { tv_sec: sec, tv_nsec: nsec as _ }
}

impl Deadline {
    /// The deadline as a CLOCK_MONOTONIC timespec.
    pub fn to_timespec(self) -> sys::timespec {
        let now = monotonic_now();
        match self {
            Deadline::After(d) => add(now, d),
            Deadline::At(i) => add(now, i.saturating_duration_since(Instant::now())),
        }
    }
}

// ----------------------------------------------------------------- domain

type ActionFn = Box<dyn Fn(&Msg<'_>) + Send + Sync + 'static>;

/// A set of places and the actions they run.  Dropping it destroys it.
pub struct Domain {
    raw: *mut sys::nemo_domain,
    // The action closures, boxed twice so that the C context pointer is
    // thin and stable; freed after the domain is destroyed.
    actions: Mutex<Vec<Box<ActionFn>>>,
}

// nemo's domain functions are thread-safe; the closures are Send + Sync.
unsafe impl Send for Domain {}
unsafe impl Sync for Domain {}

/// Builds a [`Domain`]; unset fields take nemo's defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct DomainBuilder {
    attr: sys::nemo_domain_attr,
}

impl DomainBuilder {
    /// Places at once, 1..1024 (default 64).
    pub fn max_places(mut self, n: u32) -> Self {
        self.attr.max_places = n;
        self
    }
    /// Slots of each sender->receiver ring, a power of two 8..32768 (default 256).
    pub fn ring_slots(mut self, n: u32) -> Self {
        self.attr.ring_slots = n;
        self
    }
    /// Action ids 0..n-1, 1..4096 (default 256).
    pub fn max_actions(mut self, n: u32) -> Self {
        self.attr.max_actions = n;
        self
    }
    /// Event ids 0..n-1, 1..4096 (default 256).
    pub fn max_events(mut self, n: u32) -> Self {
        self.attr.max_events = n;
        self
    }
    /// Sends a place may keep in its overflow, 1..2^24 (default 65536).
    pub fn overflow_max(mut self, n: u32) -> Self {
        self.attr.overflow_max = n;
        self
    }
    /// The interrupt-mode signal (default SIGURG).
    pub fn irq_signal(mut self, sig: i32) -> Self {
        self.attr.irq_signal = sig;
        self
    }
    /// Create the domain.
    pub fn build(self) -> Result<Domain> {
        let mut raw = std::ptr::null_mut();
        check(unsafe { sys::nemo_domain_create(&self.attr, &mut raw) })?;
        Ok(Domain { raw, actions: Mutex::new(Vec::new()) })
    }
}

/// Totals of what a domain has done (a monitoring snapshot).
pub type Counters = sys::nemo_domain_counters;

impl Domain {
    /// A domain with the default attributes.
    pub fn new() -> Result<Domain> {
        DomainBuilder::default().build()
    }

    /// A builder for the attributes.
    pub fn builder() -> DomainBuilder {
        DomainBuilder::default()
    }

    /// The raw pointer, for calls nemo-sys has and this crate has not.
    pub fn as_raw(&self) -> *mut sys::nemo_domain {
        self.raw
    }

    /// Register action `action`: `f` runs for each message sent to it, on
    /// the receiving place's thread.  Any thread, any time; once per id.
    pub fn register<F>(&self, action: u32, f: F) -> Result<()>
    where
        F: Fn(&Msg<'_>) + Send + Sync + 'static,
    {
        let b: Box<ActionFn> = Box::new(Box::new(f));
        let ctx = &*b as *const ActionFn as *mut c_void;
        let mut actions = self.actions.lock().unwrap_or_else(|e| e.into_inner());
        check(unsafe { sys::nemo_action_register(self.raw, action, Some(action_trampoline), ctx) })?;
        actions.push(b);
        Ok(())
    }

    /// The calling thread joins the domain as a place, with default attributes.
    pub fn join(&self) -> Result<Place<'_>> {
        self.join_with(&PlaceBuilder::default())
    }

    /// The calling thread joins with attributes.
    pub fn join_with(&self, b: &PlaceBuilder) -> Result<Place<'_>> {
        let mut id = 0;
        check(unsafe { sys::nemo_place_join(self.raw, &b.attr, &mut id) })?;
        Ok(Place {
            domain: self,
            id: PlaceId(id),
            notify: None,
            #[cfg(feature = "tokio")]
            afd: std::cell::RefCell::new(None),
            _thread_bound: PhantomData,
        })
    }

    /// Is `id` a place of this domain right now?
    pub fn is_place(&self, id: PlaceId) -> bool {
        unsafe { sys::nemo_place_check(self.raw, id.0) == 0 }
    }

    /// The domain's counters, summed over every place.
    pub fn counters(&self) -> Result<Counters> {
        let mut c = Counters::default();
        check(unsafe { sys::nemo_domain_get_counters(self.raw, &mut c) })?;
        Ok(c)
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        // Places borrow the domain, so none of this crate's remain.
        let rc = unsafe { sys::nemo_domain_destroy(self.raw) };
        if rc != 0 {
            // A place joined through nemo-sys directly is still there: the
            // handlers may still run, so their closures must live on.
            std::mem::forget(std::mem::take(self.actions.get_mut().unwrap_or_else(|e| e.into_inner())));
        }
    }
}

fn abort_on_panic<R>(what: &str, f: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => {
            eprintln!("nemo: a {} panicked; a panic cannot unwind through nemo: aborting", what);
            std::process::abort();
        }
    }
}

unsafe extern "C" fn action_trampoline(msg: *const sys::nemo_am_msg, ctx: *mut c_void) {
    let f = &*(ctx as *const ActionFn);
    let m = Msg { raw: &*msg };
    abort_on_panic("message handler", || f(&m));
}

// ----------------------------------------------------------------- messages

/// One message, as its handler sees it (valid during the handler only).
pub struct Msg<'a> {
    raw: &'a sys::nemo_am_msg,
}

impl<'a> Msg<'a> {
    /// The sender (it may have left since: a reply then fails with NoPlace).
    pub fn src(&self) -> PlaceId {
        PlaceId(self.raw.src)
    }
    /// This place.
    pub fn dest(&self) -> PlaceId {
        PlaceId(self.raw.dest)
    }
    /// The action being run.
    pub fn action(&self) -> u32 {
        self.raw.action
    }
    /// The event it was sent as, if it was sent by event id.
    pub fn event(&self) -> Option<u32> {
        if self.raw.event == sys::NEMO_AM_NO_EVENT {
            None
        } else {
            Some(self.raw.event)
        }
    }
    /// The sender's argument.
    pub fn arg(&self) -> u64 {
        self.raw.arg
    }
    /// The inline payload (empty if none).
    pub fn payload(&self) -> &'a [u8] {
        if self.raw.len == 0 || self.raw.payload.is_null() {
            &[]
        } else {
            unsafe { std::slice::from_raw_parts(self.raw.payload as *const u8, self.raw.len) }
        }
    }
    /// Sent with [`Msg::reply`].
    pub fn is_reply(&self) -> bool {
        self.raw.is_reply
    }
    /// A reply's tag: its request's arg (else 0).
    pub fn tag(&self) -> u64 {
        self.raw.tag
    }
    /// The raw message.
    pub fn as_raw(&self) -> &sys::nemo_am_msg {
        self.raw
    }
    /// Reply to this message: run `action` at its sender with `arg` and
    /// `payload`; there the message has `is_reply()` and `tag() == self.arg()`.
    /// From a handler, a reply never waits (a full queue keeps it for later).
    pub fn reply(&self, action: u32, arg: u64, payload: &[u8]) -> Result<()> {
        self.reply_with(action, arg, payload, Flags::NONE)
    }
    /// [`Msg::reply`] with flags.
    pub fn reply_with(&self, action: u32, arg: u64, payload: &[u8], flags: Flags) -> Result<()> {
        check(unsafe {
            sys::nemo_am_reply(self.raw, action, arg, payload.as_ptr() as *const c_void, payload.len(), flags.0)
        })
    }
}

impl fmt::Debug for Msg<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Msg")
            .field("src", &self.src())
            .field("action", &self.action())
            .field("arg", &self.arg())
            .field("payload", &self.payload())
            .field("is_reply", &self.is_reply())
            .field("tag", &self.tag())
            .finish()
    }
}

// ----------------------------------------------------------------- places

/// Place attributes; unset fields take nemo's defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlaceBuilder {
    attr: sys::nemo_place_attr,
}

impl PlaceBuilder {
    /// Pin the thread to `cpu` while it is a place.
    pub fn pin(mut self, cpu: i32) -> Self {
        self.attr.flags |= sys::NEMO_PLACE_PIN;
        self.attr.cpu = cpu;
        self
    }
    /// How waits wait: poll until the condition holds.
    pub fn spin(mut self) -> Self {
        self.attr.policy = sys::nemo_wait_policy { kind: sys::NEMO_WAIT_SPIN, spin_ns: 0 };
        self
    }
    /// How waits wait: sleep in the kernel at once.
    pub fn block(mut self) -> Self {
        self.attr.policy = sys::nemo_wait_policy { kind: sys::NEMO_WAIT_BLOCK, spin_ns: 0 };
        self
    }
    /// How waits wait: poll `spin_ns` nanoseconds, then sleep.
    pub fn hybrid(mut self, spin_ns: u32) -> Self {
        self.attr.policy = sys::nemo_wait_policy { kind: sys::NEMO_WAIT_HYBRID, spin_ns };
        self
    }
}

type NotifyFn = Box<dyn Fn(PlaceId, u32) + 'static>;

/// The calling thread as a place of a domain.  Bound to that thread (nemo
/// acts for the calling thread's place), hence neither `Send` nor `Sync`.
/// Dropping it leaves the domain, handling whatever is still queued to it.
///
/// ```compile_fail
/// fn needs_sync<T: Sync>(_: &T) {}
/// let d = nemo::Domain::new().unwrap();
/// needs_sync(&d.join().unwrap());
/// ```
pub struct Place<'d> {
    domain: &'d Domain,
    id: PlaceId,
    notify: Option<Box<NotifyFn>>,
    #[cfg(feature = "tokio")]
    afd: std::cell::RefCell<Option<std::rc::Rc<tokio::io::unix::AsyncFd<PlaceFd>>>>,
    _thread_bound: PhantomData<*const ()>,
}

fn timespec_ptr(ts: &Option<sys::timespec>) -> *const sys::timespec {
    match ts {
        Some(t) => t,
        None => std::ptr::null(),
    }
}

impl<'d> Place<'d> {
    /// This place's id.
    pub fn id(&self) -> PlaceId {
        self.id
    }

    /// Its domain.
    pub fn domain(&self) -> &'d Domain {
        self.domain
    }

    /// Send an active message: run `action` at `dest` with `arg`.  Waits
    /// for room if the queue is full (serving this place meanwhile).
    pub fn send(&self, dest: PlaceId, action: u32, arg: u64) -> Result<()> {
        check(unsafe { sys::nemo_am_send(dest.0, action, arg, 0) })
    }

    /// Send with an inline payload (at most [`PAYLOAD_MAX`] bytes) and flags.
    pub fn send_with(&self, dest: PlaceId, action: u32, arg: u64, payload: &[u8], flags: Flags) -> Result<()> {
        check(unsafe {
            sys::nemo_am_sendv(dest.0, action, arg, payload.as_ptr() as *const c_void, payload.len(), flags.0)
        })
    }

    /// Send, waiting for room in a full queue no later than `deadline`
    /// (an `Instant` or a `Duration` from now): [`ErrorKind::Timeout`] then.
    pub fn send_timed(
        &self,
        dest: PlaceId,
        action: u32,
        arg: u64,
        payload: &[u8],
        flags: Flags,
        deadline: impl Into<Deadline>,
    ) -> Result<()> {
        let ts = deadline.into().to_timespec();
        check(unsafe {
            sys::nemo_am_sendv_timed(dest.0, action, arg, payload.as_ptr() as *const c_void, payload.len(), flags.0, &ts)
        })
    }

    /// Set (replacing any) this place's notification handler: `f(src, chan)`.
    pub fn set_notify_handler<F>(&mut self, f: F) -> Result<()>
    where
        F: Fn(PlaceId, u32) + 'static,
    {
        let b: Box<NotifyFn> = Box::new(Box::new(f));
        let ctx = &*b as *const NotifyFn as *mut c_void;
        check(unsafe { sys::nemo_notify_set_handler(Some(notify_trampoline), ctx) })?;
        self.notify = Some(b); // the old one is no longer referenced by nemo
        Ok(())
    }

    /// Remove this place's notification handler (notifications to it then fail with NoHandler).
    pub fn clear_notify_handler(&mut self) -> Result<()> {
        check(unsafe { sys::nemo_notify_set_handler(None, std::ptr::null_mut()) })?;
        self.notify = None;
        Ok(())
    }

    /// Notify `dest` that channel `chan` (0..=0xFFFF) has news.
    pub fn notify(&self, dest: PlaceId, chan: u32, flags: Flags) -> Result<()> {
        check(unsafe { sys::nemo_notify(dest.0, chan, flags.0) })
    }

    /// [`Place::notify`] waiting for room no later than `deadline`.
    pub fn notify_timed(&self, dest: PlaceId, chan: u32, flags: Flags, deadline: impl Into<Deadline>) -> Result<()> {
        let ts = deadline.into().to_timespec();
        check(unsafe { sys::nemo_notify_timed(dest.0, chan, flags.0, &ts) })
    }

    /// Publish the sends deferred with [`Flags::MORE`] (to every place).
    pub fn flush(&self) -> Result<()> {
        check(unsafe { sys::nemo_flush(sys::NEMO_PLACE_ALL) })
    }

    /// Handle everything queued to this place now; the number of handlers run.
    pub fn poll(&self) -> Result<u32> {
        let mut n: c_uint = 0;
        check(unsafe { sys::nemo_poll(&mut n) })?;
        Ok(n)
    }

    /// Wait until at least one message or notification was handled
    /// (the number of handlers run), or `timeout` passed ([`ErrorKind::Timeout`]).
    pub fn wait(&self, timeout: Option<Duration>) -> Result<u32> {
        let ts = timeout.map(|d| Deadline::After(d).to_timespec());
        let mut n: c_uint = 0;
        check(unsafe { sys::nemo_place_wait(timespec_ptr(&ts), &mut n) })?;
        Ok(n)
    }

    /// [`Place::wait`] with a deadline.
    pub fn wait_until(&self, deadline: impl Into<Deadline>) -> Result<u32> {
        let ts = Some(deadline.into().to_timespec());
        let mut n: c_uint = 0;
        check(unsafe { sys::nemo_place_wait(timespec_ptr(&ts), &mut n) })?;
        Ok(n)
    }

    /// Handle messages until `word != old` (changed by this place's
    /// handlers), or `timeout` passed.  The number of handlers run.
    pub fn wait_for(&self, word: &AtomicU64, old: u64, timeout: Option<Duration>) -> Result<u32> {
        let ts = timeout.map(|d| Deadline::After(d).to_timespec());
        let mut n: c_uint = 0;
        // AtomicU64 has u64's layout; nemo reads it with an acquire load.
        check(unsafe { sys::nemo_place_wait_for(word as *const AtomicU64 as *const u64, old, timespec_ptr(&ts), &mut n) })?;
        Ok(n)
    }

    /// The place's eventfd: readable when the place has work; then call
    /// [`Place::poll`].  Owned by nemo (do not read, write or close it);
    /// closed when the place leaves.
    pub fn fd(&self) -> Result<std::os::unix::io::RawFd> {
        let mut fd = -1;
        check(unsafe { sys::nemo_place_fd(&mut fd) })?;
        Ok(fd)
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        #[cfg(feature = "tokio")]
        {
            // Deregister from the reactor while the descriptor is open.
            self.afd.get_mut().take();
        }
        let rc = unsafe { sys::nemo_place_leave() };
        if rc != 0 {
            // Only from inside a handler (EBUSY): still a place, so the
            // notification closure must stay alive.
            if let Some(b) = self.notify.take() {
                std::mem::forget(b);
            }
        }
    }
}

impl fmt::Debug for Place<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Place").field("id", &self.id).finish()
    }
}

unsafe extern "C" fn notify_trampoline(ctx: *mut c_void, src: sys::nemo_place_id, chan: u32) {
    let f = &*(ctx as *const NotifyFn);
    abort_on_panic("notification handler", || f(PlaceId(src), chan));
}

/// The nemo version actually linked.
pub fn version() -> String {
    cstr(unsafe { sys::nemo_version() })
}

// ----------------------------------------------------------------- tokio

#[cfg(feature = "tokio")]
pub use self::tokio_support::PlaceFd;

#[cfg(feature = "tokio")]
mod tokio_support {
    use super::*;
    use std::os::unix::io::{AsRawFd, RawFd};
    use std::rc::Rc;
    use tokio::io::unix::AsyncFd;

    /// A place's eventfd, not owned (nemo closes it when the place leaves).
    #[derive(Debug)]
    pub struct PlaceFd(RawFd);

    impl AsRawFd for PlaceFd {
        fn as_raw_fd(&self) -> RawFd {
            self.0
        }
    }

    impl<'d> Place<'d> {
        /// A tokio `AsyncFd` over the place's eventfd ([`Place::fd`]),
        /// registered with the current runtime's reactor.  Readable when the
        /// place has work: call [`Place::poll`] then, on this thread.  It
        /// must be dropped before the place (or use [`Place::ready`], whose
        /// own registration the place drops itself).
        pub fn async_fd(&self) -> std::io::Result<AsyncFd<PlaceFd>> {
            let fd = self.fd()?;
            AsyncFd::new(PlaceFd(fd))
        }

        /// Wait, without blocking the thread, until the place has work, then
        /// handle it (nemo_poll): the number of handlers run (at least 1).
        /// The future is not `Send` (a place is bound to its thread): run it
        /// on a current-thread runtime or in a `LocalSet` on that thread.
        pub async fn ready(&self) -> Result<u32> {
            let afd = {
                let mut slot = self.afd.borrow_mut();
                if slot.is_none() {
                    *slot = Some(Rc::new(self.async_fd().map_err(io_to_error)?));
                }
                slot.as_ref().unwrap().clone()
            };
            loop {
                let mut guard = afd.readable().await.map_err(io_to_error)?;
                let n = self.poll()?;
                // poll read the eventfd empty and re-armed the place, or,
                // leaving work queued, wrote it anew: a kick or that write
                // is a new reactor event, which clear_ready keeps.
                guard.clear_ready();
                if n > 0 {
                    return Ok(n);
                }
            }
        }
    }

    fn io_to_error(e: std::io::Error) -> Error {
        let code = e.raw_os_error().unwrap_or(errno::EINVAL);
        Error { code, message: e.to_string() }
    }
}

/// The examples of bindings/rust/README.md, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
