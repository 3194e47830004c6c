//! Raw FFI declarations for libnemo (`<nemo/nemo.h>`): the subset the
//! `nemo` crate uses, written by hand from the headers.
//!
//! Every `#[repr(C)]` struct, constant and function name here is checked
//! against the C headers by `tests/layout.rs` (a C program compiled with
//! the system `cc` prints sizeof / offsetof / the constants' values).
//! Layouts assume Linux on a 64-bit target (as nemo does).
#![allow(non_camel_case_types, non_snake_case)]

use std::os::raw::{c_char, c_int, c_long, c_uint, c_void};

/// `nemo_domain` (opaque).
#[repr(C)]
pub struct nemo_domain {
    _private: [u8; 0],
}

/// `nemo_place_id`: index (low 16 bits) and generation (high 48 bits).
pub type nemo_place_id = u64;

pub const NEMO_PLACE_NONE: nemo_place_id = 0xFFFF_FFFF_FFFF_FFFF;
pub const NEMO_PLACE_ALL: nemo_place_id = 0xFFFF_FFFF_FFFF_FFFE;
pub const NEMO_PLACES_MAX: c_uint = 1024;
pub const NEMO_OVERFLOW_MAX: c_uint = 1 << 24;

/// `struct timespec` (Linux, 64-bit).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct timespec {
    pub tv_sec: i64,
    pub tv_nsec: c_long,
}

pub type clockid_t = c_int;
pub const CLOCK_MONOTONIC: clockid_t = 1;

/// `nemo_wait_kind` (a C enum: an int).
pub type nemo_wait_kind = c_uint;
pub const NEMO_WAIT_DEFAULT: nemo_wait_kind = 0;
pub const NEMO_WAIT_SPIN: nemo_wait_kind = 1;
pub const NEMO_WAIT_BLOCK: nemo_wait_kind = 2;
pub const NEMO_WAIT_HYBRID: nemo_wait_kind = 3;
pub const NEMO_WAIT_ADAPTIVE: nemo_wait_kind = 4;

/// `nemo_wait_policy`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct nemo_wait_policy {
    pub kind: nemo_wait_kind,
    pub spin_ns: u32,
}

/// `nemo_domain_attr`; zero fields take the defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct nemo_domain_attr {
    pub max_places: c_uint,
    pub ring_slots: c_uint,
    pub max_actions: c_uint,
    pub max_events: c_uint,
    pub irq_signal: c_int,
    pub overflow_max: c_uint,
    pub flags: c_uint,
}

pub const NEMO_DOMAIN_DELAYS: c_uint = 1 << 0;

/// `nemo_domain_counters`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct nemo_domain_counters {
    pub am_sent: u64,
    pub am_handled: u64,
    pub notify_sent: u64,
    pub notify_handled: u64,
    pub kicks_futex: u64,
    pub kicks_signal: u64,
    pub kicks_avoided: u64,
    pub kicks_skipped: u64,
    pub full_waits: u64,
    pub send_failures: u64,
    pub interrupts: u64,
    pub sleeps: u64,
    pub overflowed: u64,
    pub overflow_dropped: u64,
    pub kicks_fd: u64,
    pub poll_checks: u64,
    pub kicks_deferred: u64,
    pub grants: u64,
    pub grant_revokes: u64,
    pub room_kicks: u64,
}

pub const NEMO_PLACE_PIN: c_uint = 1 << 0;
pub const NEMO_PLACE_INTERRUPTS: c_uint = 1 << 1;

/// `nemo_place_attr`; zero fields take the defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nemo_place_attr {
    pub flags: c_uint,
    pub cpu: c_int,
    pub policy: nemo_wait_policy,
    pub context: *mut c_void,
}

impl Default for nemo_place_attr {
    fn default() -> Self {
        nemo_place_attr { flags: 0, cpu: 0, policy: nemo_wait_policy::default(), context: std::ptr::null_mut() }
    }
}

/// Send flags (nemo/domain.h).
pub const NEMO_PUSH: c_uint = 1 << 0;
pub const NEMO_NONBLOCK: c_uint = 1 << 1;
pub const NEMO_MORE: c_uint = 1 << 2;

pub const NEMO_AM_PAYLOAD_MAX: c_uint = 48;
pub const NEMO_AM_ACTIONS_MAX: c_uint = 4096;
pub const NEMO_AM_EVENTS_MAX: c_uint = 4096;
pub const NEMO_AM_NO_EVENT: u32 = 0xFFFF_FFFF;
/// `NEMO_AM_EVENT(e)`: the id of event e in a send.
pub const fn NEMO_AM_EVENT(e: u32) -> u32 {
    0x8000_0000 | e
}

pub const NEMO_NOTIFY_CHAN_MAX: c_uint = 0xFFFF;
pub const NEMO_NOTIFY_FIFO_LEN: c_uint = 16;

/// `nemo_am_context` (a C enum: an int).
pub type nemo_am_context = c_uint;
pub const NEMO_AM_CTX_POLL: nemo_am_context = 0;
pub const NEMO_AM_CTX_WAIT: nemo_am_context = 1;
pub const NEMO_AM_CTX_INTERRUPT: nemo_am_context = 2;
pub const NEMO_AM_CTX_PROGRESS: nemo_am_context = 3;

/// `nemo_am_msg`: one message as its handler sees it (valid during the call only).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct nemo_am_msg {
    pub src: nemo_place_id,
    pub dest: nemo_place_id,
    pub action: u32,
    pub event: u32,
    pub arg: u64,
    pub payload: *const c_void,
    pub len: usize,
    pub context: nemo_am_context,
    pub tag: u64,
    pub is_reply: bool,
    pub place_ctx: *mut c_void,
}

pub type nemo_am_handler = Option<unsafe extern "C" fn(msg: *const nemo_am_msg, ctx: *mut c_void)>;
pub type nemo_notify_handler = Option<unsafe extern "C" fn(ctx: *mut c_void, src: nemo_place_id, chan: u32)>;

/// The errno values nemo returns (Linux), for matching results.
pub mod errno {
    use std::os::raw::c_int;
    pub const ESRCH: c_int = 3;
    pub const EINTR: c_int = 4;
    pub const EAGAIN: c_int = 11;
    pub const ENOMEM: c_int = 12;
    pub const EBUSY: c_int = 16;
    pub const EEXIST: c_int = 17;
    pub const EXDEV: c_int = 18;
    pub const EINVAL: c_int = 22;
    pub const ENOSPC: c_int = 28;
    pub const ERANGE: c_int = 34;
    pub const EDEADLK: c_int = 35;
    pub const ENOENT: c_int = 2;
    pub const EIDRM: c_int = 43;
    pub const EMSGSIZE: c_int = 90;
    pub const ENOBUFS: c_int = 105;
    pub const ENOTCONN: c_int = 107;
    pub const ETIMEDOUT: c_int = 110;
    pub const EALREADY: c_int = 114;
    pub const ECONNRESET: c_int = 104;
}

extern "C" {
    pub fn clock_gettime(clock: clockid_t, tp: *mut timespec) -> c_int;
}


extern "C" {
    // platform.h
    pub fn nemo_version() -> *const c_char;
    pub fn nemo_strerror(code: c_int) -> *const c_char;
    pub fn nemo_last_error() -> *const c_char;

    // domain.h
    pub fn nemo_domain_create(attr: *const nemo_domain_attr, out: *mut *mut nemo_domain) -> c_int;
    pub fn nemo_domain_destroy(d: *mut nemo_domain) -> c_int;
    pub fn nemo_domain_get_counters(d: *mut nemo_domain, out: *mut nemo_domain_counters) -> c_int;
    pub fn nemo_place_join(d: *mut nemo_domain, attr: *const nemo_place_attr, id: *mut nemo_place_id) -> c_int;
    pub fn nemo_place_leave() -> c_int;
    pub fn nemo_place_set_context(ctx: *mut c_void) -> c_int;
    pub fn nemo_place_context() -> *mut c_void;
    pub fn nemo_place_fd(fd: *mut c_int) -> c_int;
    pub fn nemo_place_self() -> nemo_place_id;
    pub fn nemo_place_check(d: *mut nemo_domain, id: nemo_place_id) -> c_int;
    pub fn nemo_poll(handled: *mut c_uint) -> c_int;
    pub fn nemo_place_wait(abstime: *const timespec, handled: *mut c_uint) -> c_int;
    pub fn nemo_place_wait_for(word: *const u64, old: u64, abstime: *const timespec, handled: *mut c_uint) -> c_int;
    pub fn nemo_place_set_policy(p: *const nemo_wait_policy) -> c_int;
    pub fn nemo_flush(dest: nemo_place_id) -> c_int;

    // am.h
    pub fn nemo_action_register(d: *mut nemo_domain, action: u32, f: nemo_am_handler, ctx: *mut c_void) -> c_int;
    pub fn nemo_am_send(dest: nemo_place_id, id: u32, arg: u64, flags: c_uint) -> c_int;
    pub fn nemo_am_sendv(dest: nemo_place_id, id: u32, arg: u64, payload: *const c_void, len: usize, flags: c_uint) -> c_int;
    pub fn nemo_am_send_timed(dest: nemo_place_id, id: u32, arg: u64, flags: c_uint, abstime: *const timespec) -> c_int;
    pub fn nemo_am_sendv_timed(
        dest: nemo_place_id,
        id: u32,
        arg: u64,
        payload: *const c_void,
        len: usize,
        flags: c_uint,
        abstime: *const timespec,
    ) -> c_int;
    pub fn nemo_am_reply(req: *const nemo_am_msg, id: u32, arg: u64, payload: *const c_void, len: usize, flags: c_uint) -> c_int;
    pub fn nemo_domain_am_send(
        d: *mut nemo_domain,
        dest: nemo_place_id,
        id: u32,
        arg: u64,
        payload: *const c_void,
        len: usize,
        flags: c_uint,
    ) -> c_int;

    // notify.h
    pub fn nemo_notify_set_handler(f: nemo_notify_handler, ctx: *mut c_void) -> c_int;
    pub fn nemo_notify(dest: nemo_place_id, chan: u32, flags: c_uint) -> c_int;
    pub fn nemo_notify_timed(dest: nemo_place_id, chan: u32, flags: c_uint, abstime: *const timespec) -> c_int;
    pub fn nemo_domain_notify(d: *mut nemo_domain, dest: nemo_place_id, chan: u32, flags: c_uint) -> c_int;
}

/// `nemo_place_index(id)`: the index part of a place id.
pub const fn nemo_place_index(id: nemo_place_id) -> c_uint {
    (id & 0xFFFF) as c_uint
}
