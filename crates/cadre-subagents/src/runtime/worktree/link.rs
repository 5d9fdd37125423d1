//! A worktree's links as cadre recorded them, checked before cadre touches it, and the
//! commit of its files with those records (never with what its `.git` file says now).

use super::WorktreeError;
use super::git::{Repo, Target};
use std::path::{Path, PathBuf};

/// Check that the worktree at `path` still links to the admin directory `admin` of `repo`
/// the way `git worktree add` left it: its `.git` is a plain file naming `admin`, `admin`'s
/// `gitdir` names `<path>/.git` back, and `admin`'s `commondir` names the repository. A
/// child can rewrite its own `.git` file; cadre then refuses rather than follow it.
pub async fn check(repo: &Repo, path: &Path, admin: &Path) -> Result<(), WorktreeError> {
    let refuse = |why: String| WorktreeError::Tampered {
        path: path.to_path_buf(),
        why,
    };
    let dot_git = path.join(".git");
    let meta = tokio::fs::symlink_metadata(&dot_git)
        .await
        .map_err(|e| refuse(format!("its .git cannot be read: {e}")))?;
    if !meta.file_type().is_file() {
        return Err(refuse(
            "its .git is no longer the file git wrote (a directory or a link)".to_string(),
        ));
    }
    let text = read_small(&dot_git).await.map_err(refuse)?;
    let named = text
        .strip_prefix("gitdir:")
        .map(|rest| resolve(path, rest.trim()))
        .ok_or_else(|| refuse("its .git names no git directory".to_string()))?;
    if !same(&named, admin) {
        return Err(refuse(format!(
            "its .git names {} instead of {}",
            named.display(),
            admin.display()
        )));
    }
    let back = read_small(&admin.join("gitdir")).await.map_err(refuse)?;
    if !same(&resolve(admin, back.trim()), &dot_git) {
        return Err(refuse(format!(
            "{} no longer names this worktree",
            admin.join("gitdir").display()
        )));
    }
    let common = read_small(&admin.join("commondir")).await.map_err(refuse)?;
    if !same(&resolve(admin, common.trim()), &repo.common_dir) {
        return Err(refuse(format!(
            "{} names another repository",
            admin.join("commondir").display()
        )));
    }
    Ok(())
}

/// A link file's text: these are one short line, so anything long is not git's.
async fn read_small(path: &Path) -> Result<String, String> {
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
    if bytes.len() > 4096 {
        return Err(format!("{} is not a link git wrote", path.display()));
    }
    String::from_utf8(bytes).map_err(|_| format!("{} is not a link git wrote", path.display()))
}

/// `named` as git reads it from a file in `base` (relative names are relative to it).
fn resolve(base: &Path, named: &str) -> PathBuf {
    let p = Path::new(named);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// The same place, once links in the directories above are resolved.
fn same(a: &Path, b: &Path) -> bool {
    let real = |p: &Path| {
        p.canonicalize().ok().or_else(|| {
            // A `.git` file itself is compared by its directory (it is not followed).
            let parent = p.parent()?.canonicalize().ok()?;
            Some(parent.join(p.file_name()?))
        })
    };
    match (real(a), real(b)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Commit everything in the worktree `work_tree` (if anything changed) with the admin
/// directory `admin` cadre recorded for it, and return HEAD. The caller checked the links.
pub async fn commit_all(
    repo: &Repo,
    admin: &Path,
    work_tree: &Path,
    message: &str,
) -> Result<String, WorktreeError> {
    let target = Target {
        git_dir: admin,
        work_tree: Some(work_tree),
    };
    // cadre's own state in the child's root (offloaded tool outputs) is not the child's work.
    repo.run_on(
        target,
        &["add", "--all", "--", ".", ":(exclude,glob)**/.cadre/**"],
    )
    .await?;
    // The index against HEAD, without reading the worktree again: `write-tree` reads only
    // the index, and an embedded repository counts as the commit it points at.
    let tree = repo.run_on(target, &["write-tree"]).await?;
    let head = repo.run_on(target, &["rev-parse", "HEAD^{tree}"]).await?;
    if tree.trim() != head.trim() {
        // The user's identity is read by cadre (the commit itself reads no user
        // configuration); a repository without one gets the commit under cadre's name.
        let (name, email) = repo.identity().await;
        let name = format!("user.name={}", name.as_deref().unwrap_or("cadre"));
        let email = format!(
            "user.email={}",
            email.as_deref().unwrap_or("cadre@localhost")
        );
        repo.run_on(
            target,
            &[
                "-c",
                &name,
                "-c",
                &email,
                "commit",
                "--quiet",
                "--no-verify",
                "--no-gpg-sign",
                "-m",
                message,
            ],
        )
        .await?;
    }
    Ok(repo
        .run_on(target, &["rev-parse", "HEAD"])
        .await?
        .trim()
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository with one commit and a worktree `w` of it: (tempdir, repo, worktree,
    /// its admin directory).
    async fn setup() -> (tempfile::TempDir, Repo, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().canonicalize().unwrap().join("main");
        std::fs::create_dir_all(&main).unwrap();
        super::super::tests::init_repo(&main).await;
        let repo = Repo::of_workspace(&main).await.unwrap();
        let wt = dir.path().canonicalize().unwrap().join("w");
        let wt_arg = wt.to_string_lossy().into_owned();
        repo.run(&["worktree", "add", "--quiet", "-b", "b", &wt_arg, "HEAD"])
            .await
            .unwrap();
        let admin = repo.admin_dir("w");
        (dir, repo, wt, admin)
    }

    #[tokio::test]
    async fn a_worktree_as_git_made_it_passes() {
        let (_dir, repo, wt, admin) = setup().await;
        check(&repo, &wt, &admin).await.unwrap();
    }

    #[tokio::test]
    async fn every_rewritten_link_is_refused() {
        let (dir, repo, wt, admin) = setup().await;
        let planted = dir.path().join("planted.git");
        std::fs::create_dir_all(&planted).unwrap();
        let real = std::fs::read_to_string(wt.join(".git")).unwrap();
        let spellings = [
            format!("gitdir: {}\n", planted.display()),
            format!("gitdir: {}/../planted.git\n", wt.display()),
            "gitdir: ../planted.git\n".to_string(),
            format!("gitdir: {}/../worktrees/../../planted.git", admin.display()),
            "gitdir:\n".to_string(),
            String::new(),
            format!("{real}\n{}", "x".repeat(5000)),
        ];
        for text in &spellings {
            std::fs::write(wt.join(".git"), text).unwrap();
            let e = check(&repo, &wt, &admin).await;
            assert!(
                matches!(e, Err(WorktreeError::Tampered { .. })),
                "{text:?}: {e:?}"
            );
        }
        // A link to the real admin directory is not the file git wrote either.
        std::fs::remove_file(wt.join(".git")).unwrap();
        std::os::unix::fs::symlink(&admin, wt.join(".git")).unwrap();
        assert!(check(&repo, &wt, &admin).await.is_err());
        std::fs::remove_file(wt.join(".git")).unwrap();
        std::fs::create_dir(wt.join(".git")).unwrap();
        assert!(check(&repo, &wt, &admin).await.is_err());
        std::fs::remove_dir(wt.join(".git")).unwrap();
        std::fs::write(wt.join(".git"), &real).unwrap();
        check(&repo, &wt, &admin).await.unwrap();
        // git's record pointing elsewhere, or its common directory redirected.
        std::fs::write(admin.join("commondir"), format!("{}\n", planted.display())).unwrap();
        assert!(check(&repo, &wt, &admin).await.is_err());
        std::fs::write(admin.join("commondir"), "../..\n").unwrap();
        check(&repo, &wt, &admin).await.unwrap();
        std::fs::write(
            admin.join("gitdir"),
            format!("{}/.git\n", planted.display()),
        )
        .unwrap();
        assert!(check(&repo, &wt, &admin).await.is_err());
    }
}
