"""The engine: hosted runs as durable jobs, executed by workers under leases."""
