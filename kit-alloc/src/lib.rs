//! [mimalloc](https://github.com/microsoft/mimalloc) as Rust's global allocator, through its
//! plain entry points.
//!
//! The `mimalloc` crate's allocator hands every request to `mi_malloc_aligned`, even one that
//! needs no more alignment than any block has. In mimalloc 3 that path only takes a block from
//! a page whose free list is already filled; when the list runs dry, a size whose class is not a
//! power of two (48 or 96 bytes, say) falls back to *over-allocating* from a bigger class, and
//! the page of its own class is never refilled. From then on every such allocation pays the
//! slow path and a bigger block. In kit's agent benchmark that was about 8 % of all
//! instructions.
//!
//! [`MiMalloc`] asks for a plain block (`mi_malloc`, `mi_zalloc`) whenever the alignment is at
//! most 16 bytes, and keeps it when it is aligned as asked: mimalloc's blocks are whole words,
//! and those of 16 bytes or more are 16-aligned, so in practice it always is. Only otherwise,
//! or for larger alignments, does it take the aligned path. `realloc` of a word-aligned block is
//! `mi_realloc` (what `mi_realloc_aligned` does itself at that alignment, one call shorter); a
//! block of a larger alignment is reallocated with `mi_realloc_aligned`. Memory is freed with
//! `mi_free` either way.
//!
//! ```no_run
//! #[global_allocator]
//! static ALLOCATOR: kit_alloc::MiMalloc = kit_alloc::MiMalloc;
//! ```
//!
//! On Linux, mimalloc commits whole arenas up front unless `MIMALLOC_ARENA_EAGER_COMMIT=0` is
//! set in the process's environment before it starts; set it for services that run many
//! threads (kit's README, "Choosing an allocator").

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The largest alignment a plain mimalloc block is asked for: `max_align_t`'s. Blocks of 16
/// bytes or more are 16-aligned; one that is not aligned as asked is given back.
const PLAIN_ALIGN: usize = 16;

/// The alignment every mimalloc block has: size classes are whole words, laid out from an
/// aligned start. (mimalloc's debug builds can place "guarded" blocks at any offset when asked
/// to by their environment; this crate does not enable them.)
const WORD: usize = std::mem::size_of::<usize>();

/// mimalloc as a [`GlobalAlloc`] (see the [crate docs](crate)).
#[derive(Clone, Copy, Debug, Default)]
pub struct MiMalloc;

/// Whether `p` (possibly null) satisfies `align`.
fn aligned(p: *mut c_void, align: usize) -> bool {
    (p as usize) & (align - 1) == 0
}

/// A block of `layout` from `plain` when the alignment allows and it is aligned as asked, else
/// from `aligned_at`.
///
/// # Safety
///
/// `plain` and `aligned_at` are one of mimalloc's pairs of entry points (`mi_malloc` and
/// `mi_malloc_aligned`, or `mi_zalloc` and `mi_zalloc_aligned`).
#[allow(unsafe_code)]
#[inline]
unsafe fn block(
    layout: Layout,
    plain: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned_at: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    let (size, align) = (layout.size(), layout.align());
    if align <= PLAIN_ALIGN {
        // SAFETY: mimalloc's plain entry points take any size.
        let p = unsafe { plain(size) };
        if aligned(p, align) {
            return p.cast();
        }
        // SAFETY: `p` came from mimalloc just above and is not used after.
        unsafe { mi::mi_free(p) };
    }
    // SAFETY: `align` is a power of two (a `Layout`'s always is).
    unsafe { aligned_at(size, align).cast() }
}

// SAFETY: every block comes from mimalloc and goes back to `mi_free`, which takes blocks from
// every mimalloc entry point, aligned or not; each method returns null or a block of at least
// `layout.size()` bytes aligned to `layout.align()`, as `GlobalAlloc` asks.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for MiMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the plain and the aligned allocating entry points, a pair.
        unsafe { block(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the plain and the aligned zeroing entry points, a pair.
        unsafe { block(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: the caller passes a block this allocator returned; all came from mimalloc.
        unsafe { mi::mi_free(ptr.cast()) };
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        if align <= WORD {
            // SAFETY: `ptr` is a live block of this allocator (mimalloc's realloc takes blocks
            // of its aligned entry points too); every mimalloc block is word-aligned.
            unsafe { mi::mi_realloc(ptr.cast(), new_size).cast() }
        } else {
            // SAFETY: as above; `align` is a power of two.
            unsafe { mi::mi_realloc_aligned(ptr.cast(), new_size, align).cast() }
        }
    }
}
