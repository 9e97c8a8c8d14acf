"""The nycflights13 epoch pipeline's pieces: data landing, the Spark jobs, and the daily report."""
