//! The transactions of this backend, on a pooled connection, with their BEGIN and COMMIT able to
//! go out with other statements instead of in round trips of their own (I5: a worker's turn is
//! one transaction, and each round trip is a wake-up on both sides of the socket).
//!
//! tokio-postgres sends a request when its future is first polled and reads the replies in the
//! order the requests went out, so statements awaited together (`try_join!`, `biased`: polled
//! first in the order given) are pipelined: one write, one round trip. A [`Tx`] opened with
//! [`Tx::pending`] sends its BEGIN ahead of its first statement ([`Tx::first`]), and
//! [`Tx::commit_after`] sends COMMIT behind the last ones.

use std::sync::atomic::{AtomicU8, Ordering};

use daicho_store::{Result, StoreError};
use deadpool_postgres::{ClientWrapper, Object};

use crate::backend;

/// BEGIN not sent yet ([`Tx::pending`]): nothing was sent.
const PENDING: u8 = 0;
/// BEGIN sent (perhaps not answered): statements run in the transaction.
const OPEN: u8 = 1;
/// Committed or rolled back: the connection is idle and goes back to the pool.
const FINISHED: u8 = 2;

/// An SQL condition true only inside a transaction begun by [`Tx::first_writing`].
pub(crate) const IN_TX: &str = "current_setting('daicho.in_tx', true) = 'on'";

/// The BEGIN of [`Tx::first_sharing_write_lock`].
static BEGIN_SHARING: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("BEGIN; SELECT pg_advisory_xact_lock_shared({})", crate::WRITE_LOCK));

/// The BEGIN of [`Tx::first_writing`].
static BEGIN_WRITING: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "BEGIN; SET LOCAL daicho.in_tx = 'on'; SELECT pg_advisory_xact_lock_shared({})",
        crate::WRITE_LOCK
    )
});

/// A transaction on a pooled connection. Statements run through its [`ClientWrapper`]
/// (`Deref`). Dropped unfinished (an error returned early, a cancelled future), it takes its
/// connection out of the pool and closes it, and the server rolls the transaction back: a
/// connection that may still be inside a transaction is never handed to another caller.
pub(crate) struct Tx {
    client: Option<Object>,
    state: AtomicU8,
}

impl Tx {
    /// Begins a transaction (one round trip, as tokio-postgres' own).
    pub(crate) async fn begin(client: Object) -> Result<Tx> {
        let tx = Tx::pending(client);
        tx.first(async { Ok(()) }).await?;
        Ok(tx)
    }

    /// A transaction whose BEGIN goes out with its first statement, run through [`Tx::first`]:
    /// until then, no statement may run through it (preparing one is fine: that is no part of a
    /// transaction).
    pub(crate) fn pending(client: Object) -> Tx {
        Tx { client: Some(client), state: AtomicU8::new(PENDING) }
    }

    /// Runs `first`, the transaction's first statement, behind its BEGIN when that is not sent
    /// yet (BEGIN is polled first, so every statement of `first` goes after it; one round trip
    /// for both when `first`'s statement is prepared). When the BEGIN fails, `first`'s answer is
    /// not used: a statement run outside a transaction here is a locking read, never a write (a
    /// first statement that writes goes through [`Tx::first_writing`]).
    pub(crate) async fn first<T>(&self, first: impl Future<Output = Result<T>>) -> Result<T> {
        self.first_behind("BEGIN", first).await
    }

    /// [`Tx::first`] with the write lock taken shared ([`crate::write_lock_shared`]) before
    /// `first`'s statements, in the same round trip: with the BEGIN when it is not sent yet, else
    /// as a statement of its own pipelined before them. So their snapshot is taken once the lock
    /// is held, and holds every write that held it exclusively (a statement that took the lock
    /// itself would read a snapshot taken before its wait, missing a dependent added meanwhile).
    pub(crate) async fn first_sharing_write_lock<T>(
        &self,
        first: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        if self.state.load(Ordering::Acquire) == OPEN {
            // Prepared first (not `crate::write_lock_shared`, which prepares on its first poll):
            // so the lock is sent on its first poll, ahead of `first`'s statements.
            let lock = self.client().prepare_cached(crate::WRITE_LOCK_SHARED).await.map_err(backend)?;
            let lock = async { self.client().execute(&lock, &[&crate::WRITE_LOCK]).await.map_err(backend) };
            let (_, out) = tokio::try_join!(biased; lock, first)?;
            return Ok(out);
        }
        self.first_behind(&BEGIN_SHARING, first).await
    }

    /// [`Tx::first_sharing_write_lock`] for a first statement that writes, in a transaction not
    /// begun yet: the BEGIN also sets [`IN_TX`], which each of the statement's writes must
    /// require, so that, should the BEGIN fail and the statement run on its own, it writes
    /// nothing.
    pub(crate) async fn first_writing<T>(&self, first: impl Future<Output = Result<T>>) -> Result<T> {
        if self.state.load(Ordering::Acquire) != PENDING {
            return Err(StoreError::backend("a first write in a transaction already begun"));
        }
        self.first_behind(&BEGIN_WRITING, first).await
    }

    /// Whether the transaction's BEGIN is still to be sent.
    pub(crate) fn is_pending(&self) -> bool {
        self.state.load(Ordering::Acquire) == PENDING
    }

    async fn first_behind<T>(&self, begin: &str, first: impl Future<Output = Result<T>>) -> Result<T> {
        match self.state.load(Ordering::Acquire) {
            OPEN => return first.await,
            FINISHED => return Err(StoreError::backend("a statement after the transaction ended")),
            _ => {}
        }
        // Open from here on: BEGIN may be out even if this future is dropped before its reply.
        self.state.store(OPEN, Ordering::Release);
        let begin = async { self.client().batch_execute(begin).await.map_err(backend) };
        let ((), out) = tokio::try_join!(biased; begin, first)?;
        Ok(out)
    }

    /// Commits.
    pub(crate) async fn commit(&self) -> Result<()> {
        self.commit_after(async { Ok(()) }).await
    }

    /// Runs `last` and commits, COMMIT sent behind `last`'s statements (one round trip); `last`
    /// must send all of them on its first poll (each prepared before), or a statement sent later
    /// would run after the commit, outside the transaction. When `last` fails, its error is
    /// returned, and nothing is committed: a COMMIT sent into the aborted transaction rolls it
    /// back, and one not sent leaves the transaction unfinished, closed with its connection.
    pub(crate) async fn commit_after<T>(&self, last: impl Future<Output = Result<T>>) -> Result<T> {
        if self.state.load(Ordering::Acquire) != OPEN {
            return Err(StoreError::backend("a commit outside a transaction"));
        }
        let commit = async { self.client().batch_execute("COMMIT").await.map_err(backend) };
        let (out, ()) = tokio::try_join!(biased; last, commit)?;
        self.state.store(FINISHED, Ordering::Release);
        Ok(out)
    }

    /// Rolls back (one round trip).
    pub(crate) async fn rollback(&self) -> Result<()> {
        if self.state.load(Ordering::Acquire) == OPEN {
            self.client().batch_execute("ROLLBACK").await.map_err(backend)?;
        }
        self.state.store(FINISHED, Ordering::Release);
        Ok(())
    }

    fn client(&self) -> &ClientWrapper {
        self.client.as_ref().expect("a transaction holds its connection until dropped")
    }
}

impl std::ops::Deref for Tx {
    type Target = ClientWrapper;

    fn deref(&self) -> &ClientWrapper {
        self.client()
    }
}

impl Drop for Tx {
    fn drop(&mut self) {
        if *self.state.get_mut() != OPEN {
            return;
        }
        // Out of the pool and closed: the server ends the session and rolls its transaction
        // back. (A ROLLBACK queued here could not be awaited.)
        if let Some(client) = self.client.take() {
            drop(Object::take(client));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{IN_TX, Tx};
    use crate::backend;

    /// I5, S14: a first statement that writes can tell whether its BEGIN went before it: it sees
    /// [`IN_TX`] behind [`Tx::first_writing`]'s BEGIN, and neither behind a plain one nor on its
    /// own (as when its BEGIN failed), on the same connection after such a transaction.
    #[tokio::test]
    async fn i5_s14_a_first_write_sees_whether_its_begin_went_first() {
        let Some(url) = crate::test_server() else { return };
        let config = crate::connection_config(&url).expect("a config");
        let manager = deadpool_postgres::Manager::new(config, tokio_postgres::NoTls);
        // One connection: each case runs on the session the one before it used.
        let pool = deadpool_postgres::Pool::builder(manager).max_size(1).build().expect("a pool");
        let client = || async {
            pool.get().await.unwrap_or_else(|e| {
                panic!("PostgreSQL at {url} is not reachable ({e}); set DAICHO_SKIP_PG=1 to skip")
            })
        };
        let sql = format!("SELECT coalesce({IN_TX}, false)");
        async fn seen(tx: &Tx, sql: &str) -> daicho_store::Result<bool> {
            Ok(tx.query_one(sql, &[]).await.map_err(backend)?.get::<_, bool>(0))
        }
        let tx = Tx::pending(client().await);
        assert!(tx.first_writing(seen(&tx, &sql)).await.expect("first"), "behind first_writing's BEGIN");
        tx.commit().await.expect("commit");
        drop(tx);
        let tx = Tx::pending(client().await);
        assert!(!tx.first(seen(&tx, &sql)).await.expect("first"), "behind a plain BEGIN");
        tx.commit().await.expect("commit");
        drop(tx);
        let alone = client().await.query_one(&sql, &[]).await.expect("alone").get::<_, bool>(0);
        assert!(!alone, "a statement on its own");
    }
}
