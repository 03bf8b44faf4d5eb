"""Where a drafter's heads come from: a local folder, or a Hub repo fetched into the Hugging Face cache.
Shared by Medusa and EAGLE; each names the files it needs and the error it raises."""

from pathlib import Path


def locate_heads(spec, patterns: list[str], what: str, error: type[Exception]) -> Path:
    """A local folder, or a Hub repo id (owner/name) whose `patterns` are fetched; with the Hub off or unreachable
    (checked the way models are), only the local cache can serve it. Failures are one line of `error`."""
    from ..models.loading import hub_offline, hub_unreachable_reason, looks_like_hub_id

    folder = Path(str(spec)).expanduser()
    if folder.exists() or not looks_like_hub_id(str(spec)):
        return folder
    cache_only = hub_offline() or hub_unreachable_reason() is not None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(str(spec), allow_patterns=patterns, local_files_only=cache_only))
    except Exception as exc:  # offline, no such repo, ...: one line
        where = "the local cache (the Hub is not reachable)" if cache_only else "the Hub"
        raise error(f"cannot fetch {what} '{spec}' from {where}: "
                    f"{(str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]}") from exc
