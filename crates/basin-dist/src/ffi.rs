//! The only `unsafe` of basin-dist: calls into `shim.cpp` (built by `build.rs` when the gloo
//! headers were found). Each function returns `Err(message)` for a C++ exception.
#![allow(unsafe_code)]

#[cfg(basin_gloo)]
use std::ffi::{CStr, c_char};
use std::ffi::{CString, c_int, c_void};

/// An owned `Group*` of the shim.
#[cfg_attr(not(basin_gloo), allow(dead_code))]
pub(crate) struct RawGroup(*mut c_void);

// SAFETY: c10d process groups are used from any thread in PyTorch; basin calls one collective
// at a time (the group lives in an `Arc` and every call goes through `&self` in order).
unsafe impl Send for RawGroup {}
unsafe impl Sync for RawGroup {}

#[cfg(basin_gloo)]
unsafe extern "C" {
    fn basin_dist_new_gloo(
        addr: *const c_char,
        port: u16,
        rank: c_int,
        world: c_int,
        serve: c_int,
        timeout_ms: i64,
        ifname: *const c_char,
        out: *mut *mut c_void,
        err: *mut *mut c_char,
    ) -> c_int;
    fn basin_dist_all_reduce(
        group: *mut c_void,
        tensor: *mut c_void,
        op: c_int,
        err: *mut *mut c_char,
    ) -> c_int;
    fn basin_dist_broadcast(
        group: *mut c_void,
        tensor: *mut c_void,
        root: c_int,
        err: *mut *mut c_char,
    ) -> c_int;
    fn basin_dist_barrier(group: *mut c_void, err: *mut *mut c_char) -> c_int;
    fn basin_dist_free(group: *mut c_void);
    fn basin_dist_free_message(m: *mut c_char);
}

/// Turns the shim's return code and message into a `Result`.
#[cfg(basin_gloo)]
fn check(rc: c_int, err: *mut c_char) -> Result<(), String> {
    if rc == 0 {
        return Ok(());
    }
    if err.is_null() {
        return Err("c10d failed (no message)".into());
    }
    // SAFETY: the shim wrote a NUL-terminated malloc'd string, freed here once.
    let m = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    unsafe { basin_dist_free_message(err) };
    Err(m)
}

/// Whether this build has the Gloo backend.
pub(crate) const HAS_GLOO: bool = cfg!(basin_gloo);

fn cstring(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("`{s}` contains a NUL byte"))
}

#[cfg(basin_gloo)]
impl RawGroup {
    pub(crate) fn new_gloo(
        addr: &str,
        port: u16,
        rank: usize,
        world: usize,
        serve: bool,
        timeout_ms: i64,
        ifname: &str,
    ) -> Result<Self, String> {
        let (addr, ifname) = (cstring(addr)?, cstring(ifname)?);
        let (mut out, mut err) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: valid C strings and out-pointers; the shim catches every exception.
        let rc = unsafe {
            basin_dist_new_gloo(
                addr.as_ptr(),
                port,
                rank as c_int,
                world as c_int,
                c_int::from(serve),
                timeout_ms,
                ifname.as_ptr(),
                &mut out,
                &mut err,
            )
        };
        check(rc, err).map(|()| Self(out))
    }

    pub(crate) fn all_reduce(&self, t: &mut tch::Tensor, op: c_int) -> Result<(), String> {
        let mut err = std::ptr::null_mut();
        // SAFETY: a tch tensor pointer is a `torch::Tensor*` (torch-sys's `tensor` typedef).
        let rc = unsafe { basin_dist_all_reduce(self.0, t.as_mut_ptr().cast(), op, &mut err) };
        check(rc, err)
    }

    pub(crate) fn broadcast(&self, t: &mut tch::Tensor, root: usize) -> Result<(), String> {
        let mut err = std::ptr::null_mut();
        // SAFETY: as in `all_reduce`.
        let rc =
            unsafe { basin_dist_broadcast(self.0, t.as_mut_ptr().cast(), root as c_int, &mut err) };
        check(rc, err)
    }

    pub(crate) fn barrier(&self) -> Result<(), String> {
        let mut err = std::ptr::null_mut();
        // SAFETY: a live group.
        let rc = unsafe { basin_dist_barrier(self.0, &mut err) };
        check(rc, err)
    }
}

#[cfg(basin_gloo)]
impl Drop for RawGroup {
    fn drop(&mut self) {
        // SAFETY: created by `basin_dist_new_gloo`, freed once.
        unsafe { basin_dist_free(self.0) }
    }
}

/// Without the gloo headers at build time there is no backend: every call says so.
#[cfg(not(basin_gloo))]
impl RawGroup {
    pub(crate) fn new_gloo(
        _addr: &str,
        _port: u16,
        _rank: usize,
        _world: usize,
        _serve: bool,
        _timeout_ms: i64,
        _ifname: &str,
    ) -> Result<Self, String> {
        let _ = cstring;
        Err(crate::NO_BACKEND.into())
    }
    pub(crate) fn all_reduce(&self, _t: &mut tch::Tensor, _op: c_int) -> Result<(), String> {
        Err(crate::NO_BACKEND.into())
    }
    pub(crate) fn broadcast(&self, _t: &mut tch::Tensor, _root: usize) -> Result<(), String> {
        Err(crate::NO_BACKEND.into())
    }
    pub(crate) fn barrier(&self) -> Result<(), String> {
        Err(crate::NO_BACKEND.into())
    }
}

/// Has the kernel kill the child when the process that started it dies (`PR_SET_PDEATHSIG`).
pub(crate) fn die_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and calls only the async-signal-safe
    // prctl(2).
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
