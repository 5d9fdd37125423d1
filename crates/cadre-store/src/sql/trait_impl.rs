//! [`TaskStore`] for [`SqlStore`]: each method delegates to the module that implements it.

use super::SqlStore;
use crate::error::StoreResult;
use crate::model::{
    BackgroundSummary, Checkpoint, LiveChildEntry, NewTask, ServedTurn, TaskFilter, TaskOwner,
    TaskRecord, Transition,
};
use crate::node::NodeId;
use crate::store::{CancelWatch, TaskStore};
use cadre_types::{Message, TaskStatus, Usage};
use std::time::Duration;

#[async_trait::async_trait]
impl TaskStore for SqlStore {
    fn node_id(&self) -> &NodeId {
        &self.node
    }

    async fn ping(&self) -> StoreResult<()> {
        self.db.fetch("SELECT 1", Vec::new()).await.map(|_| ())
    }

    fn teams(&self) -> Option<&dyn crate::team::TeamStore> {
        Some(self)
    }

    async fn create(&self, task: &NewTask) -> StoreResult<TaskRecord> {
        self.create_task(task).await
    }

    async fn get(&self, id: &str) -> StoreResult<Option<TaskRecord>> {
        self.get_task(id).await
    }

    async fn list(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskRecord>> {
        self.list_tasks(filter).await
    }

    async fn list_by_session(&self, session: &str) -> StoreResult<Vec<TaskRecord>> {
        self.list_tasks(&TaskFilter {
            session: Some(session.to_string()),
            ..TaskFilter::default()
        })
        .await
    }

    async fn background_summary(
        &self,
        session: &str,
        open_limit: usize,
    ) -> StoreResult<BackgroundSummary> {
        self.summary(session, open_limit).await
    }

    async fn transition(&self, id: &str, t: Transition) -> StoreResult<()> {
        self.transition_task(id, t).await
    }

    async fn transition_returning(
        &self,
        id: &str,
        t: Transition,
    ) -> StoreResult<Option<TaskRecord>> {
        self.transition_task_returning(id, t).await
    }

    async fn request_cancel(&self, id: &str) -> StoreResult<TaskStatus> {
        self.request_cancel_task(id).await
    }

    async fn set_end_state(&self, id: &str, end_state: &str) -> StoreResult<bool> {
        self.set_end_state_task(id, end_state).await
    }

    async fn set_remote_task_id(&self, id: &str, remote_task_id: &str) -> StoreResult<bool> {
        self.set_remote_id_task(id, remote_task_id).await
    }

    async fn set_served(&self, id: &str, served: &ServedTurn) -> StoreResult<bool> {
        self.set_served_task(id, served).await
    }

    async fn set_question(&self, id: &str, question: Option<&str>) -> StoreResult<bool> {
        self.set_question_task(id, question).await
    }

    async fn answer_question(&self, id: &str, question: &str, answer: &str) -> StoreResult<bool> {
        self.answer_question_task(id, question, answer).await
    }

    async fn promote(&self, id: &str) -> StoreResult<bool> {
        self.promote_task(id).await
    }

    async fn mark_delivered(&self, id: &str) -> StoreResult<bool> {
        self.mark_delivered_task(id).await
    }

    async fn mark_delivered_many(&self, ids: &[String]) -> StoreResult<u64> {
        self.mark_delivered_tasks(ids).await
    }

    async fn undelivered_finished(&self, session: &str) -> StoreResult<Vec<TaskRecord>> {
        SqlStore::undelivered_finished(self, session).await
    }

    async fn deliver_finished(&self, id: &str, session: &str) -> StoreResult<Option<TaskRecord>> {
        self.deliver_finished_one(id, session).await
    }

    async fn take_finished_task(&self, id: &str, session: &str) -> StoreResult<Option<TaskRecord>> {
        self.take_finished_one(id, session).await
    }

    async fn heartbeat(&self, node: &NodeId, ids: &[String]) -> StoreResult<u64> {
        self.heartbeat_tasks(node, ids).await
    }

    async fn heartbeat_owned(&self) -> StoreResult<u64> {
        self.heartbeat_owned_tasks().await
    }

    async fn renew_owned(&self, id: &str, epoch: u64) -> StoreResult<bool> {
        self.renew_task(id, epoch).await
    }

    async fn sweep(&self, orphan_timeout: Duration) -> StoreResult<Vec<String>> {
        let swept = self.sweep_orphans(orphan_timeout).await?;
        self.purge_ended_checkpoints_logged().await;
        Ok(swept)
    }

    async fn recover_node(&self, node: &NodeId) -> StoreResult<Vec<String>> {
        let failed = self.recover(node).await?;
        self.purge_ended_checkpoints_logged().await;
        Ok(failed)
    }

    async fn resumable_orphans(&self, orphan_timeout: Duration) -> StoreResult<Vec<TaskRecord>> {
        self.orphans_to_adopt(orphan_timeout).await
    }

    async fn release_owned(&self) -> StoreResult<Vec<String>> {
        self.release_owned_tasks().await
    }

    async fn adopt(
        &self,
        id: &str,
        seen_epoch: u64,
        orphan_timeout: Duration,
    ) -> StoreResult<Option<TaskRecord>> {
        self.adopt_task(id, seen_epoch, orphan_timeout).await
    }

    async fn owners(&self, id: &str) -> StoreResult<Vec<TaskOwner>> {
        self.owners_of(id).await
    }

    async fn watch_cancellations(&self, node: &NodeId) -> StoreResult<CancelWatch> {
        self.watch_cancel(node).await
    }

    async fn wait_terminal(&self, id: &str, timeout: Duration) -> StoreResult<Option<TaskRecord>> {
        self.wait_for_terminal(id, timeout).await
    }

    async fn append_checkpoint(
        &self,
        id: &str,
        epoch: u64,
        generation: u64,
        start: u64,
        messages: &[Message],
        usage: Usage,
    ) -> StoreResult<()> {
        if messages.is_empty() {
            return Ok(());
        }
        self.append_checkpoint_rows(id, epoch, generation, start, messages, usage)
            .await
    }

    async fn read_checkpoint(&self, id: &str) -> StoreResult<Option<Checkpoint>> {
        self.read_checkpoint_rows(id).await
    }

    async fn insert_live_child(&self, child: &LiveChildEntry) -> StoreResult<()> {
        self.insert_child(child).await
    }

    async fn create_live(&self, child: &LiveChildEntry, task: &NewTask) -> StoreResult<TaskRecord> {
        self.insert_child_with_task(child, task).await
    }

    async fn live_children(&self, session: &str) -> StoreResult<Vec<LiveChildEntry>> {
        self.children_of(session).await
    }

    async fn find_live_by_key(
        &self,
        session: &str,
        agent_key: &str,
    ) -> StoreResult<Option<LiveChildEntry>> {
        self.child_where(session, "agent_key = $2", agent_key).await
    }

    async fn find_live_by_label(
        &self,
        session: &str,
        label: &str,
    ) -> StoreResult<Option<LiveChildEntry>> {
        self.child_where(session, "lower(label) = lower($2)", label)
            .await
    }

    async fn remove_live_child(&self, session: &str, agent_key: &str) -> StoreResult<bool> {
        self.remove_child(session, agent_key).await
    }
}
