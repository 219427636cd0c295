"""The judgement: the audit, the findings and verdict it draws, what stores the filesystems, the
sealed and bucket views, and what origins mean to a reader."""
