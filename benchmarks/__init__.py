"""Benchmarks; an installed app while ``benchmarks/queue.py`` runs, so that the queue
worker will run the tasks in ``benchmarks.queue_tasks``."""
