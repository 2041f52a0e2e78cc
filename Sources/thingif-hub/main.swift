print("hub")
