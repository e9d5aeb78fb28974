use super::*;
use object_store::memory::InMemory;

fn store() -> CheckpointStore {
    CheckpointStore::new(
        Arc::new(InMemory::new()),
        Path::from("out/counts"),
        "memory://",
    )
}

fn checkpoint(epoch: u64, files: &[&str]) -> Checkpoint {
    Checkpoint {
        pipeline: "counts".into(),
        topic: "events".into(),
        epoch,
        offsets: BTreeMap::from([(0, 10 * epoch as i64), (1, 7)]),
        windows: WindowsSnapshot {
            watermark: Some(1000),
            max_event_time: BTreeMap::from([(0, 1500)]),
            open: Vec::new(),
        },
        files: files.iter().map(|f| f.to_string()).collect(),
        late_files: Vec::new(),
    }
}

#[tokio::test]
async fn the_latest_checkpoint_is_read_back_and_old_ones_pruned() {
    let s = store();
    assert_eq!(s.latest().await.unwrap(), None);
    for epoch in 1..=12 {
        s.commit(&checkpoint(epoch, &["part-1"])).await.unwrap();
    }
    assert_eq!(s.latest().await.unwrap(), Some(checkpoint(12, &["part-1"])));
    assert_eq!(
        s.all().await,
        vec![
            "out/counts/_checkpoints/00000000000000000011.json",
            "out/counts/_checkpoints/00000000000000000012.json",
        ],
        "epoch 10 < 11 numerically, not only by name"
    );
}

#[tokio::test]
async fn data_files_no_checkpoint_lists_are_removed() {
    let s = store();
    s.put_data(&data_file(1), b"one".to_vec()).await.unwrap();
    s.commit(&checkpoint(1, &[&data_file(1)])).await.unwrap();
    // a processor that died between its data file and its checkpoint
    s.put_data(&data_file(2), b"two".to_vec()).await.unwrap();
    let latest = s.latest().await.unwrap().unwrap();
    let removed = s.remove_uncommitted(&latest.files).await.unwrap();
    assert_eq!(removed, vec![data_file(2)]);
    assert_eq!(
        s.all().await,
        vec![
            "out/counts/_checkpoints/00000000000000000001.json".to_owned(),
            format!("out/counts/{}", data_file(1)),
        ]
    );
}

#[tokio::test]
async fn a_file_url_works_and_an_empty_folder_has_no_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}/counts", dir.path().display());
    let s = CheckpointStore::open(&url).unwrap();
    assert_eq!(s.latest().await.unwrap(), None);
    assert!(s.remove_uncommitted(&[]).await.unwrap().is_empty());
    s.put_data(&data_file(1), b"x".to_vec()).await.unwrap();
    s.commit(&checkpoint(1, &[&data_file(1)])).await.unwrap();
    assert_eq!(s.latest().await.unwrap().unwrap().epoch, 1);
    assert!(dir.path().join("counts").join(data_file(1)).exists());
}

#[tokio::test]
async fn late_files_no_checkpoint_lists_are_removed_too() {
    let s = store();
    s.put_data(&late_file(1), b"one".to_vec()).await.unwrap();
    let mut one = checkpoint(1, &[]);
    one.late_files = vec![late_file(1)];
    s.commit(&one).await.unwrap();
    s.put_data(&late_file(2), b"two".to_vec()).await.unwrap();
    s.put_data(&data_file(2), b"two".to_vec()).await.unwrap();
    let latest = s.latest().await.unwrap().unwrap();
    assert_eq!(latest.late_files, vec![late_file(1)]);
    let removed = s.remove_uncommitted(&latest.late_files).await.unwrap();
    assert_eq!(removed, vec![data_file(2), late_file(2)]);
    assert_eq!(
        s.all().await,
        vec![
            "out/counts/_checkpoints/00000000000000000001.json".to_owned(),
            format!("out/counts/{}", late_file(1)),
        ]
    );
}
