//! A sweep across the ranks of one MPI job: every point spans the ranks, so every rank runs
//! every point rank 0 runs. Rank 0 alone prints, keeps the journal and writes the report; it
//! tells the others which points a resumed journal holds, or, when it refuses the sweep
//! before that, to stop, so that no rank waits for a collective that never comes.

use std::time::Duration;

use super::error::CliError;
use crate::scenario::Params;

/// What rank 0 sends for a point: the journal holds it, run it, or stop the sweep. The
/// broadcast carries each as its discriminant, a float.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Held = 1,
    Run = 0,
    Stop = -1,
}

impl Order {
    fn wire(self) -> f64 {
        f64::from(self as i8)
    }

    fn read(v: f64) -> Order {
        match v {
            v if v > 0.5 => Order::Held,
            v if v < -0.5 => Order::Stop,
            _ => Order::Run,
        }
    }

    /// Broadcast `orders` from rank 0 into every rank's copy, each wait bounded by `timeout`
    /// (nothing to share in a build without MPI, where every process is rank 0).
    fn share(orders: &mut [Order], timeout: Duration, what: &str) -> Result<(), CliError> {
        let mut wire: Vec<f64> = orders.iter().map(|o| o.wire()).collect();
        #[cfg(feature = "mpi")]
        crate::distributed::world(timeout)?.broadcast(&mut wire, what);
        #[cfg(not(feature = "mpi"))]
        let _ = (&mut wire, timeout, what);
        for (o, v) in orders.iter_mut().zip(wire) {
            *o = Order::read(v);
        }
        Ok(())
    }
}

/// How long a rank waits for rank 0's list: the points' `--timeout`, else 60 s.
pub(super) fn timeout(points: &[Params]) -> Duration {
    points
        .first()
        .and_then(|p| p.float("timeout").ok())
        .map_or(Duration::from_secs(60), Duration::from_secs_f64)
}

/// A rank other than 0: receive rank 0's list and run the points it runs (at most
/// `stop_after` of them), printing and writing nothing.
pub(super) fn follow(
    points: &[Params],
    timeout: Duration,
    stop_after: Option<usize>,
    mut run: impl FnMut(&Params) -> Result<(), crate::scenario::ScenarioError>,
) -> Result<(), CliError> {
    let mut list = vec![Order::Run; points.len()];
    Order::share(&mut list, timeout, "the points to run")?;
    if list.contains(&Order::Stop) {
        // Rank 0 refused the sweep and says why.
        return Ok(());
    }
    let to_run = points.iter().zip(list).filter(|(_, d)| *d == Order::Run);
    for (p, _) in to_run.take(stop_after.unwrap_or(usize::MAX)) {
        run(p)?;
    }
    Ok(())
}

/// Rank 0's list of the points to run, owed to the other ranks: sent by
/// [`PendingShare::send`], or, when rank 0 refuses the sweep first, a stop sent on drop.
pub(super) struct PendingShare {
    points: usize,
    timeout: Duration,
    sent: bool,
}

impl PendingShare {
    pub fn new(points: usize, timeout: Duration) -> PendingShare {
        PendingShare {
            points,
            timeout,
            sent: false,
        }
    }

    /// Send which points the journal holds (`held[i]`); the others run.
    pub fn send(mut self, held: &[bool]) -> Result<(), CliError> {
        self.sent = true;
        let mut list: Vec<Order> = held
            .iter()
            .map(|&h| if h { Order::Held } else { Order::Run })
            .collect();
        Order::share(&mut list, self.timeout, "the points to run")
    }
}

impl Drop for PendingShare {
    fn drop(&mut self) {
        if self.sent {
            return;
        }
        let mut stop = vec![Order::Stop; self.points];
        // The refusal that dropped this is what rank 0 reports; a failure to tell the others
        // ends in their own deadline.
        let _ = Order::share(&mut stop, self.timeout, "the sweep's start");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_reads_back_from_the_wire() {
        for o in [Order::Held, Order::Run, Order::Stop] {
            assert_eq!(Order::read(o.wire()), o);
        }
    }
}
