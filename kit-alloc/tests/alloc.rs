//! `MiMalloc` against what `GlobalAlloc` promises: alignment, zeroing, contents kept across
//! `realloc`, for every size class a program uses and alignments up to a page; and as the
//! process's allocator under ordinary collections.

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)]

use std::alloc::{GlobalAlloc, Layout};
use std::collections::HashMap;

use kit_alloc::MiMalloc;

#[global_allocator]
static ALLOCATOR: MiMalloc = MiMalloc;

const ALIGNS: [usize; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 4096];

/// Sizes around every small size class and a few large ones, 1 KiB and 1 MiB included.
fn sizes() -> Vec<usize> {
    let mut sizes: Vec<usize> = (1..=160).collect();
    for base in [256usize, 1000, 1024, 4096, 65_536, 1 << 20, 3 << 20] {
        sizes.extend([base - 1, base, base + 1]);
    }
    sizes
}

fn fill(p: *mut u8, len: usize, seed: u8) {
    for i in 0..len {
        unsafe { p.add(i).write(seed.wrapping_add(i as u8)) };
    }
}

fn holds(p: *const u8, len: usize, seed: u8) -> bool {
    (0..len).all(|i| unsafe { p.add(i).read() } == seed.wrapping_add(i as u8))
}

#[test]
fn blocks_are_aligned_zeroed_and_keep_their_contents() {
    let a = MiMalloc;
    for &align in &ALIGNS {
        for size in sizes() {
            let layout = Layout::from_size_align(size, align).unwrap();
            let p = unsafe { a.alloc(layout) };
            assert!(!p.is_null(), "{size}/{align}");
            assert_eq!(p as usize % align, 0, "alloc {size}/{align}");
            fill(p, size, 7);
            // Grown and shrunk: the contents up to the smaller size stay, alignment too.
            let grown = unsafe { a.realloc(p, layout, size * 2 + 3) };
            assert!(!grown.is_null());
            assert_eq!(grown as usize % align, 0, "realloc up {size}/{align}");
            assert!(holds(grown, size, 7), "realloc up keeps {size}/{align}");
            let grown_layout = Layout::from_size_align(size * 2 + 3, align).unwrap();
            let shrunk = unsafe { a.realloc(grown, grown_layout, size.div_ceil(2)) };
            assert!(!shrunk.is_null());
            assert_eq!(shrunk as usize % align, 0, "realloc down {size}/{align}");
            assert!(
                holds(shrunk, size.div_ceil(2), 7),
                "realloc down keeps {size}/{align}"
            );
            unsafe {
                a.dealloc(
                    shrunk,
                    Layout::from_size_align(size.div_ceil(2), align).unwrap(),
                )
            };

            let z = unsafe { a.alloc_zeroed(layout) };
            assert!(!z.is_null());
            assert_eq!(z as usize % align, 0, "alloc_zeroed {size}/{align}");
            assert!(
                (0..size).all(|i| unsafe { z.add(i).read() } == 0),
                "zeroed {size}/{align}"
            );
            unsafe { a.dealloc(z, layout) };
        }
    }
}

#[test]
fn sizes_that_are_not_a_multiple_of_their_alignment_are_aligned_too() {
    // Valid layouts no Rust type has (24 bytes at 16, 40 at 32): the plain block may not do.
    let a = MiMalloc;
    let mut live = Vec::new();
    for _ in 0..10_000 {
        for (size, align) in [(24, 16), (40, 16), (40, 32), (8, 16), (3, 4), (1, 8)] {
            let layout = Layout::from_size_align(size, align).unwrap();
            let p = unsafe { a.alloc(layout) };
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0, "{size}/{align}");
            fill(p, size, size as u8);
            live.push((p, layout));
        }
    }
    for (p, layout) in live {
        assert!(holds(p, layout.size(), layout.size() as u8));
        unsafe { a.dealloc(p, layout) };
    }
}

#[test]
fn zeroed_blocks_are_zero_even_when_a_dirty_block_comes_back() {
    // A freed block goes back on its page's list dirty; `alloc_zeroed` must clear it, not only
    // hand out fresh (already zero) pages.
    let a = MiMalloc;
    for &align in &ALIGNS {
        for size in sizes().into_iter().filter(|&s| s <= 4096) {
            let layout = Layout::from_size_align(size, align).unwrap();
            let dirty = unsafe { a.alloc(layout) };
            unsafe { dirty.write_bytes(0xa5, size) };
            unsafe { a.dealloc(dirty, layout) };
            let mut live = Vec::new();
            for _ in 0..20_000 {
                let z = unsafe { a.alloc_zeroed(layout) };
                assert!(
                    !z.is_null() && (z as usize).is_multiple_of(align),
                    "{size}/{align}"
                );
                assert!(
                    (0..size).all(|i| unsafe { z.add(i).read() } == 0),
                    "zeroed {size}/{align}"
                );
                live.push(z);
                if z == dirty {
                    break;
                }
            }
            for z in live {
                unsafe { a.dealloc(z, layout) };
            }
        }
    }
}

#[test]
fn a_request_too_large_gets_null_and_the_old_block_stays() {
    // What `GlobalAlloc` asks: null, no abort, and a failed `realloc` leaves the block as it was.
    let a = MiMalloc;
    for &align in &ALIGNS {
        let layout = Layout::from_size_align(100, align).unwrap();
        let p = unsafe { a.alloc(layout) };
        assert!(!p.is_null());
        fill(p, 100, 3);
        let huge = (usize::MAX >> 2) & !(align - 1);
        assert!(
            unsafe { a.realloc(p, layout, huge) }.is_null(),
            "realloc {align}"
        );
        assert!(holds(p, 100, 3), "the old block is intact ({align})");
        unsafe { a.dealloc(p, layout) };
        let too_big = Layout::from_size_align(huge, align).unwrap();
        assert!(unsafe { a.alloc(too_big) }.is_null(), "alloc {align}");
        assert!(
            unsafe { a.alloc_zeroed(too_big) }.is_null(),
            "alloc_zeroed {align}"
        );
    }
}

#[test]
fn blocks_are_grown_and_freed_on_another_thread() {
    // Blocks freed by a thread that did not allocate them (aligned ones are interior pointers
    // there) take another path in mimalloc.
    let a = MiMalloc;
    let mut blocks = Vec::new();
    for &align in &ALIGNS {
        for size in [8usize, 24, 48, 100, 1000, 70_000] {
            let layout = Layout::from_size_align(size, align).unwrap();
            let p = unsafe { a.alloc(layout) };
            assert!(!p.is_null());
            fill(p, size, 9);
            blocks.push((p as usize, layout));
        }
    }
    std::thread::spawn(move || {
        for (p, layout) in blocks {
            let p = p as *mut u8;
            let bigger = layout.size() * 3;
            let q = unsafe { a.realloc(p, layout, bigger) };
            assert!(!q.is_null());
            assert_eq!(q as usize % layout.align(), 0);
            assert!(holds(q, layout.size(), 9));
            unsafe { a.dealloc(q, Layout::from_size_align(bigger, layout.align()).unwrap()) };
        }
    })
    .join()
    .unwrap();
}

#[test]
fn ordinary_collections_work_on_it() {
    // Many small blocks of a few classes freed and reused: the pattern that made the aligned
    // path over-allocate.
    let mut map: HashMap<String, Vec<u64>> = HashMap::new();
    for round in 0..50 {
        for i in 0..2_000u64 {
            map.insert(format!("key-{i}"), vec![i; (i % 9) as usize]);
        }
        for i in (0..2_000u64).step_by(2) {
            map.remove(&format!("key-{i}"));
        }
        assert_eq!(map.len(), 1_000, "round {round}");
        assert_eq!(map["key-7"], vec![7; 7]);
    }
    let wide: Box<[u128]> = (0..1_000u128).collect();
    assert_eq!(wide.as_ptr() as usize % std::mem::align_of::<u128>(), 0);
    assert_eq!(wide.iter().sum::<u128>(), 499_500);
    let big = vec![0xabu8; 1 << 20];
    assert!(big.iter().all(|&b| b == 0xab));
}

#[test]
fn ordinary_sizes_keep_a_block_of_their_own_class() {
    // What this crate is for: once a class's page runs dry, mimalloc's aligned path serves a
    // class that is not a power of two (48, 96 bytes) from a bigger one, and keeps doing so.
    // Thousands of blocks at once exhaust many pages: every block must still be its class's.
    let a = MiMalloc;
    for (size, align) in [
        (48usize, 8usize),
        (96, 8),
        (24, 8),
        (40, 4),
        (200, 8),
        (48, 16),
    ] {
        let layout = Layout::from_size_align(size, align).unwrap();
        let good = unsafe { libmimalloc_sys::mi_good_size(size) };
        let blocks: Vec<*mut u8> = (0..20_000).map(|_| unsafe { a.alloc(layout) }).collect();
        for &p in &blocks {
            let usable = unsafe { libmimalloc_sys::mi_usable_size(p.cast()) };
            assert_eq!(usable, good, "{size}/{align}: a block of another class");
        }
        for p in blocks {
            unsafe { a.dealloc(p, layout) };
        }
    }
}
