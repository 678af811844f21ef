//! The rule that orders work on several streams of one GPU: what an op enqueued on stream `s`
//! must wait for before it touches a buffer, and what it leaves behind for the next op.
//!
//! Work on one stream runs in the order it was enqueued, so only work on *other* streams needs
//! an event wait (`cuStreamWaitEvent`):
//! - a read waits for the buffer's last write, if another stream made it (read after write);
//! - a write also waits for every read since that write made on another stream (write after
//!   read), of which the last one per stream is enough (a stream's reads complete in order).
//!
//! A write clears the reads: a later writer waits for the write, which waited for them. The
//! rule is generic over the marker `E` (a CUDA event on the GPU, an op's index in the plan
//! `deps` reports), so the same code is tested without a GPU.

/// The order-keeping state of one buffer shared by the streams `0..k` of one GPU.
#[derive(Clone, Debug)]
pub struct StreamOrder<E> {
    /// The last write: the stream that made it (`None`: one outside the `k`, such as the
    /// device's own compute stream that allocated or uploaded the buffer) and its marker.
    last_write: Option<(Option<usize>, E)>,
    /// The last read on each stream since the last write.
    reads: Vec<Option<E>>,
}

impl<E> Default for StreamOrder<E> {
    fn default() -> Self {
        StreamOrder {
            last_write: None,
            reads: Vec::new(),
        }
    }
}

impl<E> StreamOrder<E> {
    /// A buffer written by work outside the `k` streams (its allocation, its upload), marked
    /// by `marker`: the first op on any stream waits for it.
    pub fn written_outside(marker: E) -> StreamOrder<E> {
        StreamOrder {
            last_write: Some((None, marker)),
            reads: Vec::new(),
        }
    }

    /// What an op on `stream` that reads the buffer waits for: the last write, when another
    /// stream (or work outside them) made it.
    pub fn before_read(&self, stream: usize) -> Option<&E> {
        match &self.last_write {
            Some((by, marker)) if *by != Some(stream) => Some(marker),
            _ => None,
        }
    }

    /// What an op on `stream` that writes the buffer (or reads and writes it) waits for: the
    /// last write when another stream made it, and the last read of every other stream since.
    pub fn before_write(&self, stream: usize) -> Vec<&E> {
        let reads = self
            .reads
            .iter()
            .enumerate()
            .filter(|(s, _)| *s != stream)
            .filter_map(|(_, r)| r.as_ref());
        self.before_read(stream).into_iter().chain(reads).collect()
    }

    /// After an op on `stream` that read the buffer was enqueued, marked by `marker`.
    pub fn read(&mut self, stream: usize, marker: E) {
        if self.reads.len() <= stream {
            self.reads.resize_with(stream + 1, || None);
        }
        self.reads[stream] = Some(marker);
    }

    /// After an op on `stream` that wrote the buffer was enqueued, marked by `marker`.
    pub fn written(&mut self, stream: usize, marker: E) {
        self.last_write = Some((Some(stream), marker));
        self.reads.iter_mut().for_each(|r| *r = None);
    }

    /// Every marker the buffer still holds: what must be reached before the buffer is freed
    /// or read on the host.
    pub fn pending(&self) -> impl Iterator<Item = &E> {
        self.last_write
            .iter()
            .map(|(_, m)| m)
            .chain(self.reads.iter().flatten())
    }

    /// The marker of the last write, whoever made it.
    pub fn last_write(&self) -> Option<&E> {
        self.last_write.as_ref().map(|(_, m)| m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_stream_never_waits_for_itself() {
        let mut o = StreamOrder::written_outside(0);
        assert_eq!(
            o.before_read(0),
            Some(&0),
            "the upload is outside the streams"
        );
        o.written(0, 1);
        o.read(0, 2);
        assert_eq!(o.before_read(0), None);
        assert!(o.before_write(0).is_empty());
        assert_eq!(o.pending().copied().collect::<Vec<_>>(), vec![1, 2]);
    }

    #[test]
    fn other_streams_wait_for_the_write_and_a_writer_for_their_reads() {
        let mut o = StreamOrder::default();
        assert_eq!(o.before_read(1), None);
        o.written(0, 10);
        assert_eq!(o.before_read(1), Some(&10));
        o.read(1, 11);
        o.read(2, 12);
        o.read(1, 13);
        // A writer on stream 1: the write (stream 0) and stream 2's read; its own stream's
        // reads come before it in stream order.
        assert_eq!(o.before_write(1), vec![&10, &12]);
        // On stream 0: its own write is in order, the last read of each other stream is not.
        assert_eq!(o.before_write(0), vec![&13, &12]);
        o.written(2, 14);
        assert_eq!(o.before_write(0), vec![&14]);
        assert_eq!(o.before_read(2), None);
        assert_eq!(o.last_write(), Some(&14));
        assert_eq!(o.pending().copied().collect::<Vec<_>>(), vec![14]);
    }

    /// What work outside the `k` streams waits for on the device (the GPU's `ComputeStreams`):
    /// a read back on the copy stream, the last write whoever made it (the upload's marker
    /// before any op wrote the buffer); the free on the owning stream, every marker.
    #[test]
    fn a_read_back_waits_for_the_last_write_and_a_free_for_every_marker() {
        let mut o = StreamOrder::written_outside(0);
        assert_eq!(o.last_write(), Some(&0), "the upload, before any op");
        o.read(1, 1);
        assert_eq!(o.last_write(), Some(&0), "a read is no write");
        assert_eq!(o.pending().copied().collect::<Vec<_>>(), vec![0, 1]);
        o.written(2, 2);
        o.read(0, 3);
        o.read(3, 4);
        assert_eq!(o.last_write(), Some(&2));
        assert_eq!(o.pending().copied().collect::<Vec<_>>(), vec![2, 3, 4]);
        // Taken for the drop, the order leaves nothing behind.
        let taken = std::mem::take(&mut o);
        assert_eq!(taken.pending().count(), 3);
        assert_eq!(o.pending().count(), 0);
        assert_eq!(o.last_write(), None);
    }
}
