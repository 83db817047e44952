"""wandb"""
