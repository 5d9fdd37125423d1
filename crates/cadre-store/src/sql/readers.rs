//! SQLite's readers: a few threads, each with a rusqlite connection of its own, taking reads
//! from one queue. A read is one hand-off to a reader thread and one back; sqlx's pool
//! added an acquire, a worker thread per connection and a message per row.
//!
//! The readers share one tokio receiver behind a mutex. (flume's MPMC queue woke fewer
//! threads, but it keeps a read queued as its last reader closes until every sender is
//! gone, so that read's caller waited forever; a tokio receiver's drop answers each read
//! left in the queue, as closed.)

use super::conn::{Arg, Row, SqliteConn, spawn_thread};
use crate::error::{StoreError, StoreResult};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Reads that may wait for a reader; a caller beyond this waits to queue its read.
const QUEUE: usize = 1024;
/// Statements each reader keeps prepared.
const STATEMENTS: usize = 32;
/// Database pages each reader keeps cached, in KiB. A reader's cache is emptied whenever
/// its next read finds the file changed, which the store's writer does all the time; at
/// SQLite's default (2 000 KiB) the four readers held 8 MiB after a scan of a 10 000-task
/// session, which bought nothing once the next write landed.
const PAGE_CACHE_KIB: u32 = 512;

enum Msg {
    Read {
        sql: String,
        args: Vec<Arg>,
        reply: oneshot::Sender<StoreResult<Vec<Row>>>,
    },
    /// One reader ends, answering once its connection is closed (one message per reader
    /// closes them all).
    Close(oneshot::Sender<()>),
}

/// The handle reads are queued on. Cloning it shares the readers.
#[derive(Clone)]
pub(crate) struct Readers {
    tx: mpsc::Sender<Msg>,
    count: usize,
}

impl Readers {
    /// Start `count` readers of the database file at `path` (its schema applied already),
    /// each with the statements `prepared` prepared as it opens.
    pub(crate) async fn start(
        path: &Path,
        count: usize,
        busy_timeout: Duration,
        prepared: &[String],
    ) -> StoreResult<Self> {
        let (tx, rx) = mpsc::channel::<Msg>(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let mut opened = Vec::with_capacity(count);
        for i in 0..count {
            let (ready, is_ready) = oneshot::channel();
            opened.push(is_ready);
            let (rx, path, prepared) = (rx.clone(), path.to_path_buf(), prepared.to_vec());
            spawn_thread(
                format!("cadre-store-reader-{i}"),
                move || match SqliteConn::open(&path, busy_timeout, STATEMENTS)
                    .and_then(|conn| conn.limit_page_cache(PAGE_CACHE_KIB).map(|()| conn))
                {
                    Ok(conn) => {
                        conn.prepare_ahead(&prepared);
                        let _ = ready.send(Ok(()));
                        let done = serve(&conn, &rx);
                        drop(conn);
                        if let Some(done) = done {
                            let _ = done.send(());
                        }
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                    }
                },
            )?;
        }
        for is_ready in opened {
            is_ready
                .await
                .map_err(|_| StoreError::Db(sqlx::Error::WorkerCrashed))??;
        }
        Ok(Readers { tx, count })
    }

    /// Run the read `sql` with `args` on a free reader; its rows.
    pub(crate) async fn fetch(&self, sql: String, args: Vec<Arg>) -> StoreResult<Vec<Row>> {
        let closed = || StoreError::Db(sqlx::Error::PoolClosed);
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Msg::Read { sql, args, reply })
            .await
            .map_err(|_| closed())?;
        answer.await.map_err(|_| closed())?
    }

    /// End every reader once the reads queued before are done, and wait for their
    /// connections to close; later reads fail with `PoolClosed`.
    ///
    /// One at a time: the last connection to close removes the WAL file, and two closing at
    /// once can each find the other still open, so that neither removes it.
    pub(crate) async fn close(&self) {
        for _ in 0..self.count {
            let (done, is_done) = oneshot::channel();
            if self.tx.send(Msg::Close(done)).await.is_err() {
                break;
            }
            let _ = is_done.await;
        }
    }
}

/// A reader's loop: take the next read from the shared queue (one reader waits on it at a
/// time), run it, answer, until the queue closes or a `Close` comes (returned, to be
/// answered once the connection is closed).
fn serve(conn: &SqliteConn, rx: &Mutex<mpsc::Receiver<Msg>>) -> Option<oneshot::Sender<()>> {
    loop {
        let next = match rx.lock() {
            Ok(mut rx) => rx.blocking_recv(),
            Err(_) => None,
        };
        match next {
            Some(Msg::Read { sql, args, reply }) => {
                let _ = reply.send(conn.fetch_now(&sql, &args));
            }
            Some(Msg::Close(done)) => return Some(done),
            None => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_reader_keeps_a_small_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x INTEGER)")
            .unwrap();
        let readers = Readers::start(&path, 2, Duration::from_secs(1), &[])
            .await
            .unwrap();
        // Reads at once, so that more than one reader is likely to answer.
        let reads = (0..4).map(|_| readers.fetch("PRAGMA cache_size".into(), Vec::new()));
        for rows in futures::future::join_all(reads).await {
            let size: i64 = rows.unwrap()[0].try_get(0).unwrap();
            assert_eq!(size, -i64::from(PAGE_CACHE_KIB), "KiB, not SQLite's 2 000");
        }
        readers.close().await;
    }
}
