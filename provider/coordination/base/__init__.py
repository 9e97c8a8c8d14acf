"""The ground floor: errors, names and znode paths, typed transaction steps, the session that sends
them (request ids, lost answers, retries), the epoch calendar and ACLs. Imports nothing above it.
"""
