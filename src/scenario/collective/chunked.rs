//! A buffer cut into chunks that engine ops borrow one chunk at a time, or whole.
//!
//! The ring all-reduce needs a device's gradient as one contiguous buffer (the products write
//! it in place) and as k chunks that different devices read and write at once (each chunk a
//! var of its own). A lock per buffer would serialize the devices; a copy into k separate
//! buffers costs a pass over megabytes every step. So each chunk has a borrow flag, taken
//! without blocking: the engine's ordering guarantees that a chunk is free when an op that
//! declared its var runs, and a borrow that finds it taken is an ordering bug, reported as the
//! op's error rather than a data race.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut, Range};
use std::sync::atomic::{AtomicIsize, Ordering};

use crate::engine::OpError;

/// `n` floats in `k` chunks, each borrowed for reading (shared) or writing (exclusive).
pub struct Chunked {
    data: Box<[UnsafeCell<f32>]>,
    /// Per chunk: 0 free, n > 0 borrowed by n readers, -1 borrowed by a writer.
    state: Box<[AtomicIsize]>,
}

// SAFETY: every access to `data` goes through a guard whose chunk flag excludes conflicting
// guards (one writer, or any number of readers, per chunk), and chunks are disjoint ranges.
unsafe impl Sync for Chunked {}

impl Chunked {
    /// `n` zeros in `k` chunks.
    pub fn new(n: usize, k: usize) -> Chunked {
        Chunked {
            data: (0..n).map(|_| UnsafeCell::new(0.0)).collect(),
            state: (0..k.max(1)).map(|_| AtomicIsize::new(0)).collect(),
        }
    }

    pub fn chunks(&self) -> usize {
        self.state.len()
    }

    /// Elements of chunk `c`.
    pub fn range(&self, c: usize) -> Range<usize> {
        crate::distributed::chunk(self.data.len(), self.chunks(), c)
    }

    fn taken(c: usize) -> OpError {
        OpError::msg(format!(
            "gradient chunk {c} was in use by another op: the ops' vars do not order them"
        ))
    }

    pub fn read(&self, c: usize) -> Result<Read<'_>, OpError> {
        let flag = &self.state[c];
        flag.fetch_update(Ordering::Acquire, Ordering::Relaxed, |v| {
            (v >= 0).then_some(v + 1)
        })
        .map_err(|_| Self::taken(c))?;
        Ok(Read { buf: self, c })
    }

    pub fn write(&self, c: usize) -> Result<Write<'_>, OpError> {
        self.write_chunks(c..c + 1)
    }

    pub fn write_all(&self) -> Result<Write<'_>, OpError> {
        self.write_chunks(0..self.chunks())
    }

    /// `chunks` to write, all or none: a chunk found taken gives back those taken before it.
    fn write_chunks(&self, chunks: Range<usize>) -> Result<Write<'_>, OpError> {
        for c in chunks.clone() {
            if self.state[c]
                .compare_exchange(0, -1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                for taken in chunks.start..c {
                    self.state[taken].store(0, Ordering::Release);
                }
                return Err(Self::taken(c));
            }
        }
        Ok(Write { buf: self, chunks })
    }

    fn elements(&self, chunks: &Range<usize>) -> Range<usize> {
        self.range(chunks.start).start..self.range(chunks.end - 1).end
    }

    fn ptr(&self, at: usize) -> *mut f32 {
        // `UnsafeCell<f32>` has the layout of `f32`; a one-past-the-end pointer is allowed.
        self.data.as_ptr().wrapping_add(at) as *mut f32
    }
}

pub struct Read<'a> {
    buf: &'a Chunked,
    c: usize,
}

impl Deref for Read<'_> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        let r = self.buf.range(self.c);
        // SAFETY: this guard holds a read borrow of chunk `c`: no writer of it exists.
        unsafe { std::slice::from_raw_parts(self.buf.ptr(r.start), r.len()) }
    }
}

impl Drop for Read<'_> {
    fn drop(&mut self) {
        self.buf.state[self.c].fetch_sub(1, Ordering::Release);
    }
}

/// Chunks borrowed for writing (one, or all of them).
pub struct Write<'a> {
    buf: &'a Chunked,
    chunks: Range<usize>,
}

impl Deref for Write<'_> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        let r = self.buf.elements(&self.chunks);
        // SAFETY: this guard holds the only borrow of these chunks.
        unsafe { std::slice::from_raw_parts(self.buf.ptr(r.start), r.len()) }
    }
}

impl DerefMut for Write<'_> {
    fn deref_mut(&mut self) -> &mut [f32] {
        let r = self.buf.elements(&self.chunks);
        // SAFETY: this guard holds the only borrow of these chunks, and `&mut self` the only
        // reference to the guard.
        unsafe { std::slice::from_raw_parts_mut(self.buf.ptr(r.start), r.len()) }
    }
}

impl Drop for Write<'_> {
    fn drop(&mut self) {
        for c in self.chunks.clone() {
            self.buf.state[c].store(0, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_buffer_and_borrow_like_a_lock_that_never_waits() {
        let b = Chunked::new(10, 3);
        assert_eq!(
            (0..3).map(|c| b.range(c)).collect::<Vec<_>>(),
            [0..3, 3..6, 6..10]
        );
        {
            let mut all = b.write_all().unwrap();
            all.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32);
            // While written, nothing else gets in.
            assert!(b.read(1).is_err() && b.write(2).is_err());
        }
        let (r1, r1b) = (b.read(1).unwrap(), b.read(1).unwrap());
        assert_eq!(&*r1, &[3.0, 4.0, 5.0]);
        assert_eq!(&*r1b, &*r1);
        // Readers of chunk 1 keep out its writers, not the writers of other chunks.
        assert!(b.write(1).is_err());
        let mut w2 = b.write(2).unwrap();
        w2[0] = -1.0;
        assert!(b.write_all().is_err());
        // A failed whole borrow gave back the chunks it had taken.
        assert!(b.write(0).is_ok());
        drop((r1, r1b, w2));
        assert_eq!(b.write_all().unwrap()[6], -1.0);
    }

    #[test]
    fn chunks_borrowed_on_other_threads_are_disjoint() {
        let b = std::sync::Arc::new(Chunked::new(1000, 4));
        let threads: Vec<_> = (0..4)
            .map(|c| {
                let b = b.clone();
                std::thread::spawn(move || {
                    let mut w = b.write(c).expect("each thread its own chunk");
                    w.iter_mut().for_each(|v| *v = c as f32);
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let all = b.write_all().unwrap();
        for c in 0..4 {
            assert!(all[b.range(c)].iter().all(|&v| v == c as f32));
        }
    }
}
