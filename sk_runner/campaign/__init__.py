"""Campaigns: many Stage O sessions on a fleet (Ray), one session pinned to one server.

Ray is imported only in :mod:`sk_runner.campaign.ray_executor`, lazily; without
it the campaign runs its sessions one after another on this machine.
"""
