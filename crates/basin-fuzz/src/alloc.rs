//! A global allocator that counts: live bytes, the peak since the last reset, the largest single
//! request, and a bound above which a request is refused (the process then aborts with a message
//! naming the input, so a hostile header can never make a reader take the machine's memory).
//! The one `unsafe` of the crate: `GlobalAlloc` is an unsafe trait.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Counting allocator over the system allocator.
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);
static BOUND: AtomicUsize = AtomicUsize::new(usize::MAX);

#[global_allocator]
static GLOBAL: Counting = Counting;

fn note(size: usize) -> bool {
    if size > BOUND.load(Relaxed) {
        // Allocation-free message: format! would allocate inside the allocator.
        let msg = b"basin-fuzz: a reader asked for one allocation above the bound (see --bound); aborting\n";
        let _ = std::io::Write::write_all(&mut std::io::stderr(), msg);
        return false;
    }
    LARGEST.fetch_max(size, Relaxed);
    let live = LIVE.fetch_add(size, Relaxed) + size;
    PEAK.fetch_max(live, Relaxed);
    true
}

// SAFETY: every method forwards to `System` with the caller's layout, unchanged; the counters
// are atomics and never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !note(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as received.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !note(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as received.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !note(new_size) {
            return std::ptr::null_mut();
        }
        LIVE.fetch_sub(layout.size(), Relaxed);
        // SAFETY: `ptr` came from `System` with `layout`; the caller guarantees `new_size`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Sets the largest single allocation allowed (bytes).
pub fn set_bound(bytes: usize) {
    BOUND.store(bytes, Relaxed);
}

/// Resets the peak and largest-request counters (the peak restarts from the live bytes).
pub fn reset() {
    PEAK.store(LIVE.load(Relaxed), Relaxed);
    LARGEST.store(0, Relaxed);
}

/// Live bytes now.
pub fn live() -> usize {
    LIVE.load(Relaxed)
}

/// Peak live bytes since the last [`reset`].
pub fn peak() -> usize {
    PEAK.load(Relaxed)
}

/// Largest single request since the last [`reset`].
pub fn largest() -> usize {
    LARGEST.load(Relaxed)
}
