"""Campaigns: many Stage O sessions on a fleet (Ray), each pinned to its server (or, spanning hosts, to its servers).

Ray is imported lazily, only where a campaign runs on it (:mod:`sk_runner.campaign.ray_executor`) or a
session spans hosts (:mod:`sk_runner.hosts.ray_hosts`); without it the campaign runs its sessions one after
another on this machine.
"""
