"""The broker's Prometheus metrics: hot-path counters (``stats``) and the scrape-time collector
(``collector``); the list is docs/observability.md's."""
