"""The one verdict: is a listed folder a complete checkpoint, and are these bytes the
manifest's?

Every reader asks it here and nowhere else: ``latest`` (and ``--best``), ``pull``, ``list``
(and the model card's and the job summary's table, which render ``list``), ``prune`` (each
keep rule, and so ``--free-storage``, which frees only what the prune deleted), ``promote``
(the source opened complete, and on a bucket each file's identity confirmed before its
server-side copy), the DCP reader and the retention of ``watch`` and the Trainer callback
(both through ``pull`` and ``prune``). A store answers what it lists of a folder (each file's
size and its content hash where the store has one: a bucket's Xet hash, a repo's LFS sha256
or git blob id); the verdict holds that to the manifest:

- :func:`judge_folder`: the folder's status and, when it is not complete, why;
- :func:`confirmed`: whether what the store listed of one file *vouches* for the manifest's
  bytes (promote copies only such files; a listing that merely does not contradict the
  manifest, a size alone, is not enough);
- :func:`satisfies`: whether bytes read (their digest) are the ones a manifest entry names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ckpt_action.checkpoint.manifest import FileDigest, Manifest, RemoteFile, folder_tree_oid
from ckpt_action.checkpoint.signing import SIGNATURE_NAME

TORN = ("it has no manifest, and other checkpoint-N folders of this repo have one: taken as a push cut short,"
        " not as a checkpoint another tool wrote")
BUCKET_TORN = ("it has no manifest: in a bucket a folder without one is a push cut short (or another tool's),"
               " never a checkpoint")
UNFINISHED = "its push has not finished (manifest marked incomplete)"


@dataclass(frozen=True)
class Verdict:
    """What :func:`judge_folder` found: ``status`` is ``complete``, ``foreign`` (no manifest:
    another tool's folder, complete only if the store takes such folders), ``incomplete``
    (its manifest says so) or ``mismatch`` (its files are not the manifest's)."""

    status: str
    problems: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return not self.problems


def judge_folder(manifest: Manifest | None, files: Mapping[str, RemoteFile], *, bucket: bool,
                 manifests_here: bool = False) -> Verdict:
    """The verdict on a folder whose manifest is ``manifest`` (None: it has none) and whose
    other files the store listed as ``files`` (relative paths, the manifest excluded).

    Without a manifest there is nothing to hold the files to (:func:`no_manifest_problem`):
    in a model repo the folder (written by Trainer or ``hf upload``) counts as complete if it
    holds files, unless ``manifests_here`` (a ``checkpoint-N`` beside ckpt-action's own
    checkpoints: a push cut short); in a bucket (``bucket``), where a push writes its
    manifest last, it never does.

    >>> from ckpt_action.checkpoint.manifest import digest_bytes
    >>> m = Manifest(files={"w.bin": digest_bytes("w.bin", b"abc")}, step=1, complete=True)
    >>> judge_folder(m, {"w.bin": RemoteFile(3, m.files["w.bin"].git_oid, None)}, bucket=False)
    Verdict(status='complete', problems=())
    >>> judge_folder(m, {"w.bin": RemoteFile(4, None, None)}, bucket=False).problems
    ('w.bin has 4 bytes, manifest says 3',)
    """
    if manifest is None:
        if not files:
            return Verdict("foreign", ("the folder is empty",))
        why = no_manifest_problem(manifests_here, bucket=bucket)
        return Verdict("foreign", (why,) if why else ())
    if not manifest.complete:
        return Verdict("incomplete", (UNFINISHED,))
    problems = [why for path, want in manifest.files.items() if (why := file_problem(path, want, files.get(path)))]
    # model.sig is the one file a manifest cannot list (it signs the manifest): its presence
    # is no mismatch; pull checks it against the signer asked for.
    problems += [f"{path} is not in the manifest" for path in files
                 if path not in manifest.files and path != SIGNATURE_NAME]
    return Verdict("mismatch" if problems else "complete", tuple(problems))


def no_manifest_problem(manifests_here: bool, *, bucket: bool = False) -> str | None:
    """The one rule for a folder without a manifest (latest, pull, promote, prune, list):
    taken as another tool's checkpoint (Trainer, ``hf upload``) only in a repo where no
    ``checkpoint-N`` folder has a manifest (``manifests_here`` False). Beside ckpt-action's
    own checkpoints such a folder is far more likely a push that was cut short (or ranks
    that wrote elsewhere); in a bucket it always is."""
    if bucket:
        return BUCKET_TORN
    return TORN if manifests_here else None


def file_problem(path: str, want: FileDigest, got: RemoteFile | None) -> str | None:
    """Why the file the store listed at ``path`` is not the manifest's ``want`` (None: nothing
    the listing says contradicts it): missing, another size, or another content hash
    (the Xet hash both name, the LFS sha256, the git blob id)."""
    if got is None:
        return f"{path} is missing"
    if got.size != want.size:
        return f"{path} has {got.size} bytes, manifest says {want.size}"
    if xet_differs(want, got):
        return overwritten_file(path, got, want)
    if got.lfs_sha256 is not None and got.lfs_sha256 != want.sha256:
        return f"{path} has sha256 {got.lfs_sha256[:12]}…, manifest says {want.sha256}"
    if got.lfs_sha256 is None and want.git_oid and got.git_oid and got.git_oid != want.git_oid:
        return f"{path} differs from the manifest (git blob id)"
    return None


def confirmed(want: FileDigest, got: RemoteFile | None) -> bool:
    """True when what the store listed certainly holds ``want``'s bytes: no
    :func:`file_problem`, and a content hash that names them (the Xet hash both sides
    record, the LFS sha256, or the git blob id). A size alone confirms nothing: a file
    overwritten with other bytes of the same size has it too.

    >>> confirmed(FileDigest(3, "a" * 64), RemoteFile(3, None, None))
    False
    >>> confirmed(FileDigest(3, "a" * 64, xet="b" * 64), RemoteFile(3, None, None, "b" * 64))
    True
    """
    if got is None or file_problem("", want, got) is not None:
        return False
    if want.xet is not None and got.xet is not None:
        return True  # equal (file_problem saw no difference): the same bytes
    if got.lfs_sha256 is not None:
        return got.lfs_sha256 == want.sha256
    return want.git_oid is not None and got.git_oid == want.git_oid


def satisfies(have: FileDigest, want: FileDigest) -> bool:
    """Bytes with digest ``have`` are what ``want`` (a manifest entry, or what a tree
    listing vouches for: sha256 for LFS files, the git id for regular ones) describes.

    An expectation with neither hash vouches for nothing, so nothing satisfies it: a
    size alone would let any bytes of that length through.
    """
    if have.size != want.size:
        return False
    if want.sha256 is not None:
        return have.sha256 == want.sha256
    return want.git_oid is not None and have.git_oid == want.git_oid


def tree_matches(manifest: Manifest, manifest_bytes: bytes, tree_id: str | None) -> bool:
    """A repo's folder whose git tree id (``tree_id``, from the listing of its parent) is the
    one the manifest's files and the manifest itself make: it holds exactly those files,
    each by its git blob id or LFS pointer (the repo's content hash of the whole folder,
    one request instead of a listing). False says nothing: the folder must be listed."""
    return tree_id is not None and folder_tree_oid(manifest.files, manifest_bytes) == tree_id


def xet_differs(want: FileDigest, got: RemoteFile) -> bool:
    """Both sides name the file's Xet hash, and not the same one: other bytes."""
    return want.xet is not None and got.xet is not None and got.xet != want.xet


def overwritten_file(path: str, got: RemoteFile, want: FileDigest) -> str:
    """Why a file whose Xet hash is not the manifest's is not the checkpoint's."""
    assert got.xet is not None and want.xet is not None
    return (f"{path} was overwritten after the manifest was written (Xet hash {got.xet[:12]}…, manifest says"
            f" {want.xet[:12]}…)")
