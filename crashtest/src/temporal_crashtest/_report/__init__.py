"""The report: the verdicts and their text (`report`), the formats it is written in (`formats`,
one table: JSON, Markdown, HTML `html`, JUnit XML and CI annotations `ci`), and the shards'
reports read back (`input`) and merged (`merge`)."""
