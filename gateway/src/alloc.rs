//! Reserving memory for sizes a peer declared.
//!
//! Kafka arrays are prefixed with an element count, and a decoder may reserve
//! room for that many elements before it reads the first one: kafka-protocol
//! 0.18 calls `Vec::with_capacity(count)` in its array decoders. A request of
//! twenty bytes can declare 2^31 elements. With the system allocator such a
//! reservation of tens or hundreds of GiB fails, and Rust answers a failed
//! allocation by aborting the whole process — every client would lose its
//! broker because one sent a bad frame.
//!
//! [`WireSafeAlloc`] is the global allocator of the `aerostream` binary and of
//! the gateway's tests and fuzz target. It passes ordinary requests to the
//! system allocator and serves requests of [`LARGE_ALLOCATION`] bytes or more
//! from anonymous mappings made with `MAP_NORESERVE`: such a reservation costs
//! address space only, and pages are committed when they are first written.
//! A decoder that reserved for a lying count writes only the elements the
//! frame really holds (a frame is capped by `socket.request.max.bytes`), then
//! fails on the short buffer; dropping its vector unmaps the reservation. The
//! connection is closed with a decode error and nothing else is affected.
//!
//! Honest large allocations behave as before: the system allocator also
//! serves requests of this size with fresh mappings. The difference is that
//! memory is no longer promised up front, so real exhaustion surfaces as the
//! kernel's out-of-memory handling instead of an allocation failure (the same
//! as Linux's default overcommit for ordinary allocations). Under
//! `vm.overcommit_memory=2` the kernel ignores `MAP_NORESERVE` and the guard
//! does not help; the broker's documentation says so.
#![expect(
    unsafe_code,
    reason = "a global allocator and anonymous mappings cannot be written without unsafe"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;

/// Requests of at least this many bytes are served from lazily committed
/// mappings.
pub const LARGE_ALLOCATION: usize = 64 << 20;

/// Mappings are page aligned; larger alignments go to the system allocator.
const PAGE: usize = 4096;

/// The global allocator that keeps wire-declared reservations from aborting
/// the process. See the module documentation.
pub struct WireSafeAlloc;

fn is_large(size: usize, align: usize) -> bool {
    size >= LARGE_ALLOCATION && align <= PAGE
}

/// Maps `size` bytes of zeroed, lazily committed memory, or returns null.
fn map(size: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping with a null hint touches no
    // existing memory; the result is checked against MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        ptr::null_mut()
    } else {
        p.cast()
    }
}

// SAFETY: every pointer handed out is either the system allocator's (and goes
// back to it) or a fresh page-aligned mapping of at least the requested size
// (and is unmapped with that size). `is_large` depends only on the layout,
// which callers must pass unchanged to `dealloc`/`realloc`, so each pointer
// is always returned to the allocator that produced it.
unsafe impl GlobalAlloc for WireSafeAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(layout.size(), layout.align()) {
            map(layout.size())
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(layout.size(), layout.align()) {
            // Anonymous mappings are zero-filled by the kernel.
            map(layout.size())
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if is_large(layout.size(), layout.align()) {
            // SAFETY: `p` came from `map` with this size (see the impl note).
            // munmap only fails for arguments this code never passes.
            unsafe {
                libc::munmap(p.cast(), layout.size());
            }
        } else {
            // SAFETY: forwarded with the caller's guarantees.
            unsafe { System.dealloc(p, layout) }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old_large = is_large(layout.size(), layout.align());
        let new_large = is_large(new_size, layout.align());
        match (old_large, new_large) {
            // SAFETY: forwarded with the caller's guarantees.
            (false, false) => unsafe { System.realloc(p, layout, new_size) },
            (true, true) => {
                // SAFETY: `p` is a mapping of `layout.size()` bytes; the
                // kernel may move it and returns MAP_FAILED on failure.
                let q = unsafe {
                    libc::mremap(p.cast(), layout.size(), new_size, libc::MREMAP_MAYMOVE)
                };
                if q == libc::MAP_FAILED {
                    ptr::null_mut()
                } else {
                    q.cast()
                }
            }
            _ => {
                // SAFETY: the caller guarantees `new_size` is valid for this
                // alignment.
                let new_layout =
                    unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                // SAFETY: a non-zero size, per the caller's guarantees.
                let q = unsafe { self.alloc(new_layout) };
                if !q.is_null() {
                    // SAFETY: both blocks are live, distinct and at least
                    // this long.
                    unsafe {
                        ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                        self.dealloc(p, layout);
                    }
                }
                q
            }
        }
    }
}

/// Caps glibc's malloc arenas at `arenas`, unless `MALLOC_ARENA_MAX` is set
/// (the operator's choice wins). Returns the cap that now applies, or `None`
/// where there is nothing to cap (other C libraries, other systems).
///
/// glibc gives a thread that finds every arena busy a new one, up to eight
/// per core, and never returns an arena. The blocking threads that run
/// `fdatasync` and segment seals come and go with the load, so each new one
/// could claim another arena and leave about a megabyte resident in it: the
/// broker's RSS then climbed for minutes and stayed up (27 to 48 MiB over
/// 150 s at 50k msg/s on two cores; capped at two arenas, 30 to 34 MiB).
/// Past the cap, threads share arenas; each arena's lock is held only for
/// the allocation itself, and the broker's hot threads (one per shard)
/// allocate little per message.
pub fn cap_malloc_arenas(arenas: usize) -> Option<usize> {
    if let Some(set) = std::env::var_os("MALLOC_ARENA_MAX") {
        return set.to_str().and_then(|v| v.trim().parse().ok());
    }
    set_arena_max(arenas.max(1))
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_arena_max(arenas: usize) -> Option<usize> {
    let value = libc::c_int::try_from(arenas).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt only changes allocator tuning; any value is accepted
    // for M_ARENA_MAX and it returns 0 on failure.
    let ok = unsafe { libc::mallopt(libc::M_ARENA_MAX, value) };
    (ok == 1).then_some(arenas)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_arena_max(_arenas: usize) -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wire_sized_reservation_far_beyond_memory_does_not_abort() {
        // 2^31 elements of 64 bytes: 128 GiB, far more than the machine has.
        let mut v: Vec<[u8; 64]> = Vec::with_capacity(1 << 31);
        for i in 0..1000u32 {
            v.push([i as u8; 64]);
        }
        assert_eq!(v[999], [(999u32 as u8); 64]);
        assert!(v.capacity() >= 1 << 31);
    }

    #[test]
    fn large_blocks_keep_their_bytes_across_growth_and_shrinking() {
        let mut v: Vec<u8> = Vec::with_capacity(1024);
        v.extend((0..1024u32).map(|i| i as u8));
        // small -> large
        v.reserve_exact(LARGE_ALLOCATION);
        v.extend(std::iter::repeat_n(7u8, 4096));
        // large -> larger (mremap)
        v.reserve_exact(2 * LARGE_ALLOCATION);
        assert!(v[..1024].iter().enumerate().all(|(i, b)| *b == i as u8));
        assert!(v[1024..].iter().all(|b| *b == 7));
        // large -> small
        v.truncate(100);
        v.shrink_to_fit();
        assert!(v.iter().enumerate().all(|(i, b)| *b == i as u8));
    }

    #[test]
    fn zeroed_large_blocks_read_as_zero() {
        let v = vec![0u64; LARGE_ALLOCATION / 8 + 1];
        assert!(v.iter().step_by(4096).all(|x| *x == 0));
    }
}
