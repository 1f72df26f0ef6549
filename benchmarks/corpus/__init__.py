"""The corpus build (corpus_build/): reading WARC files, extraction, language, quality, dedup and the merge.

warc_readers (stage 1: fastwarc vs warcio), warc_streaming (HTTP vs disk), extract_speed (stages 2-7 on
generated pages vs trafilatura), extract_quality (article bodies on real pages vs trafilatura, resiliparse,
readability), warc_stage_speed (the per-WARC stages on real pages, per variant: the planner's rate),
build_speed (the whole build on a sample world, 1 and 2 workers), language_gate, quality_filter_speed,
quality_profile_keep, minhash_speed, merge (out of core vs in memory), visibility_rules.
"""
