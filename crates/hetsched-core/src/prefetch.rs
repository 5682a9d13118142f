//! Reading ahead: a hint to the processor to bring memory into its caches
//! before the engine reads it. With 100 000 tasks almost every event finds
//! its task's record out of the caches; asking for the next event's task
//! while this event is handled overlaps the two waits.
//!
//! A prefetch reads nothing into the program and cannot fault, so it never
//! changes a result; on targets without one it is nothing.

/// Ask for the cache lines of the first `bytes` bytes of `r` (at most the
/// whole object; at least its first line).
#[inline(always)]
pub(crate) fn lines<T>(r: &T, bytes: usize) {
    let base = (r as *const T).cast::<u8>();
    let to = bytes.min(std::mem::size_of::<T>());
    line(base);
    let mut off = 64;
    while off < to {
        line(base.wrapping_add(off));
        off += 64;
    }
}

#[inline(always)]
fn line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` is a hint: it does not read memory into the
    // program, cannot fault whatever the address, and SSE is part of every
    // x86-64 processor. `p` points into a live object anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
