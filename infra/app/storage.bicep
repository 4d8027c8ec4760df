// The storage account of the app (tables: jobs, history, due index; the executions queue) and of
// the Functions host (blobs: deployment package, keys, timer leases). Only identities get in.
param name string
param location string
param tags object = {}
param deploymentContainerName string

resource account 'Microsoft.Storage/storageAccounts@2025-01-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }
}

resource blobs 'Microsoft.Storage/storageAccounts/blobServices@2025-01-01' = {
  parent: account
  name: 'default'
}

// Flex Consumption deploys the app from a package in this container.
resource packages 'Microsoft.Storage/storageAccounts/blobServices/containers@2025-01-01' = {
  parent: blobs
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

output name string = account.name
output deploymentContainerName string = packages.name
